"""One way to run a model on a :class:`~interp_rand.tasks.base.Batch`: any model that speaks the
TransformerLens hook-name protocol, ours (which takes seeds and attention masks) or a
``TransformerBridge`` (token ids only).

    >>> logits = logits_of(model, batch)                         # [batch, pos, d_vocab_out]
    >>> logits = logits_of(model, batch, [(name, hook_fn)])      # with scoped forward hooks
"""

from __future__ import annotations

from torch import Tensor, nn

from interp_rand.model.transformer import HookedTransformer
from interp_rand.tasks.base import Batch


def model_args(model: nn.Module, batch: Batch) -> tuple[tuple, dict]:
    """Positional and keyword arguments of ``model``'s forward for ``batch``: ours takes seeds
    and attention masks; a ``TransformerBridge`` takes token ids only."""
    if isinstance(model, HookedTransformer):
        return (batch.inputs,), batch.model_kwargs()
    if batch.seeds is not None or batch.attention_mask is not None:
        raise ValueError(
            f"{type(model).__name__} takes token ids only; this batch has seeds or an attention "
            "mask (use the toolkit's HookedTransformer)"
        )
    return (batch.inputs,), {}


def logits_of(model: nn.Module, batch: Batch, fwd_hooks: list | None = None) -> Tensor:
    """``[batch, pos, d_vocab_out]`` task-position logits, with optional scoped forward hooks."""
    args, kwargs = model_args(model, batch)
    with model.hooks(fwd_hooks=fwd_hooks or []):
        out = model(*args, **kwargs)
    return out.logits if hasattr(out, "logits") else out


__all__ = ["logits_of", "model_args"]
