"""Interventions: swapping a subspace of one hook's activations from the source run into the
base run, the interchange accuracy of a swap, and the subspace learnt by DAS."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from interp_rand.tasks.base import Batch
from probes.activations import collect_activations, logits_of, seed_offset
from probes.interchange.pairs import Pairs


def _positions(model: nn.Module, positions: list[int]) -> Tensor:
    return torch.tensor(positions) + seed_offset(model)


def swap_hook(U: Tensor, source_acts: Tensor, positions: Tensor):
    """A TransformerLens hook function: at ``positions`` set ``h <- h + U U^T (h_s - h)``
    (``source_acts`` ``[n, P, d]``, the source's activations there; a hook with more than three
    dims, e.g. ``hook_z``, is flattened to ``d`` and back)."""

    def hook_fn(act: Tensor, hook=None) -> Tensor:
        act = act.clone()
        here = act[:, positions]
        flat = here.reshape(len(act), len(positions), -1)
        new = flat + ((source_acts - flat) @ U) @ U.T
        act[:, positions] = new.reshape(here.shape)
        return act

    return hook_fn


def intervened_logits(model: nn.Module, batch: Batch, hook: str, positions: list[int], U: Tensor,
                      source_acts: Tensor) -> Tensor:
    """``[n, pos, d_vocab_out]`` logits of ``batch`` with the ``U`` subspace at ``hook`` and
    ``positions`` taken from ``source_acts`` ``[n, P, d]``."""
    return logits_of(model, batch, [(hook, swap_hook(U, source_acts, _positions(model, positions)))])


@contextlib.contextmanager
def _frozen(model: nn.Module) -> Iterator[None]:
    """The model in eval mode with no parameter gradients, restored on exit."""
    flags = [(p, p.requires_grad) for p in model.parameters()]
    was_training = model.training
    model.eval()
    for p, _ in flags:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)
        model.train(was_training)


def _source_acts(model: nn.Module, batch: Batch, hook: str, positions: list[int]) -> Tensor:
    return collect_activations(model, batch, [hook], positions)[hook]  # [n, P, d]


@torch.no_grad()
def iia(model: nn.Module, batch: Batch, pairs: Pairs, hook: str, positions: list[int], U: Tensor,
        batch_size: int = 1024) -> float:
    """Interchange-intervention accuracy of subspace ``U`` on ``pairs``: the share whose answers
    at ``pairs.outputs`` all equal the counterfactual targets."""
    if not len(pairs):
        return float("nan")
    hits = []
    for start in range(0, len(pairs), batch_size):
        part = slice(start, start + batch_size)
        base, src = batch[pairs.base[part]], batch[pairs.source[part]]
        logits = intervened_logits(model, base, hook, positions, U, _source_acts(model, src, hook, positions))
        pred = logits[:, base.answer_positions[pairs.outputs]].argmax(-1)
        hits.append((pred == pairs.targets[part]).all(1))
    return float(torch.cat(hits).float().mean())


def random_subspace(d: int, k: int, generator: torch.Generator) -> Tensor:
    """``[d, k]`` uniformly random orthonormal columns (QR of a Gaussian matrix, signs fixed)."""
    q, r = torch.linalg.qr(torch.randn(d, k, generator=generator))
    return q * torch.sign(torch.diagonal(r))[None, :]


@dataclass(frozen=True)
class DASConfig:
    """Training of the DAS rotation: ``steps`` Adam steps at ``lr`` on minibatches of
    ``batch_size`` training pairs (passes over the pairs in random order)."""

    steps: int = 400
    batch_size: int = 128
    lr: float = 1e-2

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1 or not self.lr > 0:
            raise ValueError(f"DASConfig needs steps >= 1, batch_size >= 1 and lr > 0; got {self}")


def _minibatches(n: int, config: DASConfig, generator: torch.Generator) -> Iterator[Tensor]:
    """The training pairs' indices of each of ``config.steps`` steps: passes over ``n`` pairs in
    a random order, ``config.batch_size`` at a time (a new order drawn when a pass ends)."""
    order, start = torch.randperm(n, generator=generator), 0
    for _ in range(config.steps):
        if start >= n:
            order, start = torch.randperm(n, generator=generator), 0
        yield order[start:start + config.batch_size]
        start += config.batch_size


def skip_das(d: int, n_pairs: int, generator: torch.Generator, config: DASConfig = DASConfig()) -> None:
    """Take from ``generator`` exactly the draws :func:`train_das` takes for a ``d``-dim hook and
    ``n_pairs`` training pairs (the rotation's start, each pass's order), and fit nothing: a
    caller that skips one fit of a series (its site can change no answer) leaves every later fit
    of the series with the draws, hence the subspace, it would have had."""
    random_subspace(d, d, generator)
    for _ in _minibatches(n_pairs, config, generator):
        pass


def train_das(model: nn.Module, batch: Batch, pairs: Pairs, hook: str, positions: list[int], k: int,
              generator: torch.Generator, config: DASConfig = DASConfig()) -> Tensor:
    """Learn an orthogonal ``d x d`` rotation whose first ``k`` dimensions, swapped from the
    source, give the counterfactual answers of ``pairs``; returns ``U`` ``[d, k]`` (those
    dimensions in the model's basis). The model's own weights are not changed."""
    if not len(pairs):
        raise ValueError("DAS needs at least one training pair")
    with _frozen(model):
        src_all = _source_acts(model, batch[pairs.source], hook, positions)
        d = src_all.shape[-1]
        rotation = nn.Linear(d, d, bias=False)
        with torch.no_grad():
            rotation.weight.copy_(random_subspace(d, d, generator))
        nn.utils.parametrizations.orthogonal(rotation)
        optimiser = torch.optim.Adam(rotation.parameters(), lr=config.lr)
        bases = batch[pairs.base]
        out_pos = bases.answer_positions[pairs.outputs]
        for idx in _minibatches(len(pairs), config, generator):
            U = rotation.weight[:, :k]
            logits = intervened_logits(model, bases[idx], hook, positions, U, src_all[idx])
            loss = F.cross_entropy(logits[:, out_pos].reshape(-1, logits.shape[-1]),
                                   pairs.targets[idx].reshape(-1))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        return rotation.weight[:, :k].detach().clone()
