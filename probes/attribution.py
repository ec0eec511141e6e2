"""Attribution with captum (integrated gradients, layer conductance, layer integrated
gradients): to the input channels (the task input's embedding ``hook_embed`` and the raw seed
``hook_seed``) and to any hook point; and the share of attribution that goes to the seed
channel, per output, per example and averaged.

The attributed inputs are activations at hook points: captum interpolates them and a scoped
TransformerLens hook writes the interpolated value into the forward pass. So the same code
works on our model and on a ``TransformerBridge``, for token and vector inputs alike.

Outputs: at each answer position, the log-probability of the model's predicted class
(``"ce"`` tasks, and the colouring task) or each output bit's logit (``"bce"`` tasks).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from captum.attr import IntegratedGradients, LayerConductance, LayerIntegratedGradients
from torch import Tensor, nn

from interp_rand.losses import get_loss_kind
from interp_rand.model.capture import capture_into
from interp_rand.tasks.base import Batch
from probes.activations import check_hooks, logits_of

ATTRIBUTION_METHODS = ("integrated_gradients", "layer_conductance", "layer_integrated_gradients")
# The seed distributions of our tasks (Bernoulli(1/2) bits, Uniform[0, 1) noise) have mean 1/2:
# the neutral baseline for the seed channel.
SEED_BASELINE = 0.5


@dataclass(frozen=True)
class SeedAttribution:
    """Integrated-gradients attribution split between the task input and the seed channel.

    Attributes:
        outputs: names of the attributed outputs (``"pos 11 class*"``, ``"pos 12 bit 3"``).
        input_attribution: ``[batch, n_outputs]`` summed |attribution| to ``hook_embed``.
        seed_attribution: ``[batch, n_outputs]`` summed |attribution| to ``hook_seed``.
        delta: ``[batch, n_outputs]`` IG's completeness error (sum of attributions minus the
            output change), a check on the number of steps.
    """

    outputs: tuple[str, ...]
    input_attribution: Tensor
    seed_attribution: Tensor
    delta: Tensor

    @property
    def seed_share(self) -> Tensor:
        """``[batch, n_outputs]`` in [0, 1]: seed |attribution| / total |attribution|."""
        total = self.input_attribution + self.seed_attribution
        return self.seed_attribution / total.clamp_min(1e-12)

    @property
    def mean_share_per_output(self) -> Tensor:
        """``[n_outputs]``."""
        return self.seed_share.mean(0)

    @property
    def mean_share(self) -> float:
        return float(self.seed_share.mean())


def _output_targets(model: nn.Module, task, batch: Batch) -> tuple[Tensor, tuple[str, ...], bool]:
    """``[batch, n_outputs]`` flat indices into ``[n_answer * d_vocab_out]`` and their names."""
    with torch.no_grad():
        logits = logits_of(model, batch)[:, batch.answer_positions]  # [b, A, V]
    positions = batch.answer_positions.tolist()
    # the loss kind says what to explain: the predicted class's log-probability, or every bit
    decoding = get_loss_kind(getattr(task, "loss_kind", "ce")).decoding
    index, units, log_probs = decoding.attributed_units(logits)
    return index, tuple(f"pos {p} {u}" for p in positions for u in units), log_probs


def _forward_fn(model: nn.Module, batch: Batch, channels: list[str], log_probs: bool):
    """``f(*channel_values, *model_inputs) -> [n, n_answer * d_vocab_out]``."""
    positions = batch.answer_positions

    def forward(*args):
        values, rest = args[: len(channels)], args[len(channels):]
        part = Batch(inputs=rest[0], targets=rest[0], loss_mask=rest[0], answer_positions=positions,
                     seeds=rest[1], attention_mask=rest[2])

        def writer(value):
            return lambda act, hook: value.to(act.dtype).view_as(act)

        logits = logits_of(model, part, [(c, writer(v)) for c, v in zip(channels, values)])[:, positions]
        if log_probs:
            logits = logits.log_softmax(-1)
        return logits.flatten(1)

    return forward


def input_channels(model: nn.Module) -> list[str]:
    """``["hook_embed"]``, plus ``"hook_seed"`` for a model with a seed channel."""
    return ["hook_embed"] + (["hook_seed"] if "hook_seed" in model.hook_dict else [])


def _channel_values(model: nn.Module, batch: Batch, channels: list[str]) -> tuple[Tensor, ...]:
    store: dict[str, Tensor] = {}
    with torch.no_grad():
        logits_of(model, batch, capture_into(store, channels, clone=True))
    return tuple(store[c] for c in channels)


def _extra(batch: Batch) -> tuple:
    return (batch.inputs, batch.seeds, batch.attention_mask)


def _baselines(channels: list[str], values: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    return tuple(torch.full_like(v, SEED_BASELINE) if c == "hook_seed" else torch.zeros_like(v)
                 for c, v in zip(channels, values))


def seed_attribution(
    model: nn.Module, task, batch: Batch, *, n_steps: int = 32, internal_batch_size: int | None = 4096
) -> SeedAttribution:
    """Integrated gradients (captum) of every output to the task input (``hook_embed``) and the
    raw seed (``hook_seed``; baseline: the seed distribution's mean 1/2, input baseline 0).

    Raises ``ValueError`` for a model without a seed channel."""
    channels = input_channels(model)
    if "hook_seed" not in channels:
        raise ValueError("this model has no seed channel (no hook_seed); seed attribution needs d_seed > 0")
    targets, names, log_probs = _output_targets(model, task, batch)
    values = _channel_values(model, batch, channels)
    ig = IntegratedGradients(_forward_fn(model, batch, channels, log_probs))
    inp, seed, delta = [], [], []
    for j in range(targets.shape[1]):
        attrs, err = ig.attribute(values, baselines=_baselines(channels, values), target=targets[:, j].tolist(),
                                  additional_forward_args=_extra(batch), n_steps=n_steps,
                                  internal_batch_size=internal_batch_size, return_convergence_delta=True)
        inp.append(attrs[0].abs().flatten(1).sum(1))
        seed.append(attrs[1].abs().flatten(1).sum(1))
        delta.append(err.detach())
    return SeedAttribution(outputs=names, input_attribution=torch.stack(inp, 1).detach(),
                           seed_attribution=torch.stack(seed, 1).detach(), delta=torch.stack(delta, 1))


def hook_attribution(
    model: nn.Module,
    task,
    batch: Batch,
    hook: str,
    method: str = "layer_conductance",
    *,
    output: int = 0,
    n_steps: int = 32,
    internal_batch_size: int | None = 4096,
) -> Tensor:
    """captum's layer conductance or layer integrated gradients of output ``output`` (an index
    into the outputs of :func:`seed_attribution`) to hook point ``hook``, integrated from zero
    inputs (and seed 1/2), summed over the feature dimensions.

    Returns:
        ``[batch, pos]`` (hook positions; a seed token included) attribution per position.

    On a ``TransformerBridge``, ``blocks.{l}.hook_resid_mid`` is an alias of ``ln2``'s input
    hook, which the residual skip connection bypasses: layer *integrated gradients* there
    interpolates only the MLP branch and differs from ours (layer conductance, resid_pre/post
    and the other hooks agree to 1e-6).
    """
    if method not in ATTRIBUTION_METHODS[1:]:
        raise ValueError(f"method={method!r} is not allowed; choose from {ATTRIBUTION_METHODS[1:]}")
    check_hooks(model, [hook])
    channels = input_channels(model)
    targets, names, log_probs = _output_targets(model, task, batch)
    if not 0 <= output < len(names):
        raise ValueError(f"output={output} must lie in 0..{len(names) - 1} ({', '.join(names)})")
    values = _channel_values(model, batch, channels)
    forward = _forward_fn(model, batch, channels, log_probs)
    layer = model.hook_dict[hook]
    algo = LayerConductance(forward, layer) if method == "layer_conductance" else LayerIntegratedGradients(forward, layer)
    attrs = algo.attribute(values, baselines=_baselines(channels, values), target=targets[:, output].tolist(),
                           additional_forward_args=_extra(batch), n_steps=n_steps,
                           internal_batch_size=internal_batch_size)
    attrs = attrs[0] if isinstance(attrs, (tuple, list)) else attrs
    return attrs.detach().flatten(2).sum(-1)


def input_attribution(
    model: nn.Module, task, batch: Batch, *, output: int = 0, n_steps: int = 32
) -> tuple[Tensor, ...]:
    """captum integrated gradients of one output to each input channel, summed over features:
    ``[batch, pos]`` per channel (``hook_embed``, then ``hook_seed`` if any)."""
    channels = input_channels(model)
    targets, names, log_probs = _output_targets(model, task, batch)
    values = _channel_values(model, batch, channels)
    ig = IntegratedGradients(_forward_fn(model, batch, channels, log_probs))
    attrs = ig.attribute(values, baselines=_baselines(channels, values), target=targets[:, output].tolist(),
                         additional_forward_args=_extra(batch), n_steps=n_steps)
    return tuple(a.detach().flatten(2).sum(-1) if a.dim() > 2 else a.detach() for a in attrs)


__all__ = [
    "ATTRIBUTION_METHODS",
    "SeedAttribution",
    "hook_attribution",
    "input_attribution",
    "input_channels",
    "seed_attribution",
]
