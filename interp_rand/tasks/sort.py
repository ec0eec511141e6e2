"""Sorting: read a list of ``L`` values, then write it back in ascending order.

Sequence layout (``V`` = ``vocab``, ``SEP`` = ``V``)::

    x_1 .. x_L  SEP  y_1 .. y_L        y = sorted(x), duplicates kept

The model reads ``sequence[:, :-1]`` (``2L`` positions) and predicts ``sequence[:, 1:]``; only
the ``L`` predictions of ``y_1 .. y_L`` (positions ``L .. 2L-1``, i.e. from ``SEP`` onwards) are
scored. Lists are drawn uniformly with replacement, so duplicates are common for small ``V``;
the metadata records them because they are where sorting circuits usually break.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor

from interp_rand.tasks.base import SORTED_OUTPUT, Batch, PairBatch, register_task, token_model_config

if TYPE_CHECKING:
    from interp_rand.model.config import ModelConfig


from interp_rand.validation import is_int as _is_int


@register_task
@dataclass(frozen=True)
class SortTask:
    """Sort ``length`` values from ``0 .. vocab-1`` ascending.

    Attributes:
        length: ``L``, list length (>= 2).
        vocab: ``V``, number of distinct values (>= 2); the separator token is ``V``.
    """

    name: ClassVar[str] = "sort"
    description: ClassVar[str] = "write a list of tokens back in ascending order (duplicates kept)"
    loss_kind: ClassVar[str] = "ce"
    capabilities: ClassVar[frozenset[str]] = frozenset({SORTED_OUTPUT})
    # the primitive families `explain` builds candidate algorithms from (circuits.explain)
    # the field that is its length (interp_rand.tasks.lengths: training on a range, generalisation)
    length_field: ClassVar[str] = "length"
    families: ClassVar[tuple[str, ...]] = ("order", "search", "copy", "count", "position")

    length: int = 10
    vocab: int = 64

    def __post_init__(self) -> None:
        # Fail at construction, not at the first sample deep inside a training run.
        self.validate()

    # ------------------------------------------------------------------ config

    @property
    def sep(self) -> int:
        """The separator token id (``vocab``)."""
        return self.vocab

    @property
    def d_vocab(self) -> int:
        """Input and output vocabulary size: the ``V`` values plus ``SEP``."""
        return self.vocab + 1

    @property
    def n_ctx(self) -> int:
        """Model context: ``2L`` (the last answer token is never fed back in)."""
        return 2 * self.length

    def position_names(self) -> list[str]:
        return [f"x{j}" for j in range(self.length)] + ["SEP"] + [f"y{k}" for k in range(self.length - 1)]

    def token_labels(self, batch: Batch, row: int) -> list[str]:
        return [f"{name}: {'SEP' if int(t) == self.sep else int(t)}"
                for name, t in zip(self.position_names(), batch.inputs[row])]

    def validate(self) -> None:
        if not _is_int(self.length) or self.length < 2:
            raise ValueError(f"SortTask.length={self.length!r} must be an integer >= 2")
        if not _is_int(self.vocab) or self.vocab < 2:
            raise ValueError(f"SortTask.vocab={self.vocab!r} must be an integer >= 2")

    def config_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def model_config(self, **overrides: Any) -> "ModelConfig":
        """Default: :func:`~interp_rand.tasks.base.token_model_config` sized for this task."""
        return token_model_config(self.n_ctx, self.d_vocab, overrides)

    # ------------------------------------------------------------------ data

    def answer_positions(self, device: torch.device | str | None = None) -> Tensor:
        """``[L]`` long: positions ``L .. 2L-1``, whose targets are ``y_1 .. y_L``."""
        return torch.arange(self.length, 2 * self.length, device=device)

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        """``n`` lists drawn uniformly with replacement; see :meth:`build` for the batch."""
        lists = torch.randint(
            0, self.vocab, (n, self.length), generator=generator, device=generator.device
        )
        return self._build(lists)

    def build(self, lists: Tensor) -> Batch:
        """The batch for given lists.

        Args:
            lists: ``[batch, L]`` integer values in ``0 .. V-1``.

        Returns:
            A :class:`Batch` with ``inputs``/``targets``/``loss_mask`` ``[batch, 2L]`` and
            metadata ``rank``, ``is_duplicate``, ``answer_is_duplicate`` ``[batch, L]`` and
            ``n_distinct`` ``[batch]``.
        """
        if lists.ndim != 2 or lists.shape[1] != self.length:
            raise ValueError(
                f"lists must have shape [batch, length={self.length}], got {tuple(lists.shape)}"
            )
        if lists.dtype.is_floating_point or lists.dtype == torch.bool:
            raise ValueError(f"lists must be an integer tensor, got dtype {lists.dtype}")
        if lists.numel() and (int(lists.min()) < 0 or int(lists.max()) >= self.vocab):
            raise ValueError(f"list values must be in 0..{self.vocab - 1} (vocab={self.vocab})")
        return self._build(lists.long())

    def _build(self, lists: Tensor) -> Batch:
        """:meth:`build` without input checks (the sampling hot path)."""
        batch, length = lists.shape
        device = lists.device
        # A stable sort makes ``rank`` well defined for equal values: earlier input first.
        answer, order = torch.sort(lists, dim=1, stable=True)
        positions = torch.arange(length, device=device)
        rank = torch.empty_like(order).scatter_(1, order, positions.expand(batch, length))

        sep = torch.full((batch, 1), self.sep, dtype=torch.long, device=device)
        sequence = torch.cat([lists, sep, answer], dim=1)  # [batch, 2L + 1]
        inputs = sequence[:, :-1]
        answer_positions = self.answer_positions(device)
        loss_mask = torch.zeros(batch, 2 * length, dtype=torch.bool, device=device)
        loss_mask[:, answer_positions] = True
        # -1 off the answers, so a loss that forgets the mask fails loudly instead of training
        # the model to predict random list elements.
        targets = torch.full_like(inputs, -1)
        targets[:, answer_positions] = answer

        # Duplicates are adjacent in the sorted answer, which avoids a [batch, V] count table.
        same_as_next = answer[:, 1:] == answer[:, :-1]  # [batch, L-1]
        no = torch.zeros(batch, 1, dtype=torch.bool, device=device)
        answer_is_duplicate = torch.cat([same_as_next, no], 1) | torch.cat([no, same_as_next], 1)
        is_duplicate = answer_is_duplicate.gather(1, rank)
        n_distinct = length - same_as_next.sum(1)

        return Batch(
            inputs=inputs,
            targets=targets,
            loss_mask=loss_mask,
            answer_positions=answer_positions,
            metadata={
                "rank": rank,
                "is_duplicate": is_duplicate,
                "answer_is_duplicate": answer_is_duplicate,
                "n_distinct": n_distinct,
            },
        )

    def lists(self, batch: Batch) -> Tensor:
        """``[batch, L]`` the input lists of a batch made by this task."""
        return batch.inputs[:, : self.length]

    def corrupt(self, batch: Batch, generator: torch.Generator) -> PairBatch:
        """Replace one uniformly chosen element per row by a different uniform value.

        The multiset changes, so the sorted answer always differs. ``changed`` ``[batch]`` is
        the index (``0 .. L-1``) of the replaced input element.
        """
        clean_lists = self.lists(batch)
        n = clean_lists.shape[0]
        device = generator.device
        changed = torch.randint(0, self.length, (n,), generator=generator, device=device)
        # Adding 1..V-1 modulo V is uniform over the V-1 other values.
        shift = torch.randint(1, self.vocab, (n,), generator=generator, device=device)
        changed = changed.to(clean_lists.device)
        shift = shift.to(clean_lists.device)
        rows = torch.arange(n, device=clean_lists.device)
        corrupted_lists = clean_lists.clone()
        corrupted_lists[rows, changed] = (clean_lists[rows, changed] + shift) % self.vocab
        return PairBatch(clean=batch, corrupted=self._build(corrupted_lists), changed=changed)
