"""A task's data: :class:`Batch` (one batch, with the metadata of its examples) and
:class:`PairBatch` (clean and corrupted inputs for patching).

A foundation of the core: the tasks produce batches, the losses, the evaluation, the trainer and
the analyses read them, so the batch sits below all of them (importing no other module of the
toolkit) and :mod:`interp_rand.tasks` gives it with its protocol (``from interp_rand.tasks
import Batch``). Layout convention: see :mod:`interp_rand.tasks.base`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass(frozen=True)
class Batch:
    """One batch of task data.

    Attributes:
        inputs: ``[batch, pos]`` long token ids, or ``[batch, pos, d_input]`` float vectors.
        targets: ``[batch, pos]`` long class ids (``-1`` where there is no target), or
            ``[batch, pos, d_vocab_out]`` float targets for multi-label tasks.
        loss_mask: ``[batch, pos]`` bool, true on answer positions only.
        answer_positions: ``[n_answer]`` long, the positions where ``loss_mask`` is true (the
            same for every example).
        seeds: optional ``[batch, d_seed]`` or ``[batch, pos, d_seed]`` float seed bits/noise.
        attention_mask: optional ``[batch, pos, pos]`` bool, true where a query may attend.
        metadata: per-example tensors for later analysis, each with leading dim ``batch``
            (e.g. ``carry_in: [batch, n_answer]``).
    """

    inputs: Tensor
    targets: Tensor
    loss_mask: Tensor
    answer_positions: Tensor
    seeds: Tensor | None = None
    attention_mask: Tensor | None = None
    metadata: dict[str, Tensor] = field(default_factory=dict)

    def __len__(self) -> int:
        return self.inputs.shape[0]

    def __getitem__(self, index: Tensor | slice) -> "Batch":
        """Select examples (rows); ``answer_positions`` is shared and kept as is."""

        def pick(t: Tensor | None) -> Tensor | None:
            return None if t is None else t[index]

        return dataclasses.replace(
            self,
            inputs=self.inputs[index],
            targets=self.targets[index],
            loss_mask=self.loss_mask[index],
            seeds=pick(self.seeds),
            attention_mask=pick(self.attention_mask),
            metadata={k: v[index] for k, v in self.metadata.items()},
        )

    def answer_targets(self) -> Tensor:
        """``[batch, n_answer]`` the targets at the answer positions."""
        return self.targets[:, self.answer_positions]

    def model_kwargs(self) -> dict[str, Tensor]:
        """The keyword arguments a model's forward needs besides ``inputs``."""
        kwargs: dict[str, Tensor] = {}
        if self.seeds is not None:
            kwargs["seeds"] = self.seeds
        if self.attention_mask is not None:
            kwargs["attention_mask"] = self.attention_mask
        return kwargs

    @staticmethod
    def concat(batches: "list[Batch]") -> "Batch":
        """Stack batches of one task along the example axis."""
        first = batches[0]

        def cat(get) -> Tensor | None:
            parts = [get(b) for b in batches]
            return None if parts[0] is None else torch.cat(parts)

        return Batch(
            inputs=cat(lambda b: b.inputs),
            targets=cat(lambda b: b.targets),
            loss_mask=cat(lambda b: b.loss_mask),
            answer_positions=first.answer_positions,
            seeds=cat(lambda b: b.seeds),
            attention_mask=cat(lambda b: b.attention_mask),
            metadata={k: torch.cat([b.metadata[k] for b in batches]) for k in first.metadata},
        )


@dataclass(frozen=True)
class PairBatch:
    """Clean and corrupted inputs for patching: row i of ``corrupted`` is a minimal edit of row
    i of ``clean`` (same length and answer positions) whose answer differs.

    ``changed``: ``[batch]`` long, which element/place was edited, for analysis.
    """

    clean: Batch
    corrupted: Batch
    changed: Tensor


__all__ = ["Batch", "PairBatch"]
