"""D-RASP's benchmark models, read from a local copy: their tasks as :class:`TaskSpec` s and their
GPT-2 checkpoints as our model (:func:`~interp_rand.importers.hf_gpt2.read_gpt2`, logits checked
against TransformerLens's bridge). Nothing is downloaded: point :func:`read_drasp` at a model
folder of the ``share/saved_models`` directory of D-RASP's public repository
(``lacoco-lab/decompiling_transformers``), e.g. ``sort-@1l1h256d3lr01drop``.

Their layout (``patching_data.py`` there): token ids ``0 .. V-1`` are the vocabulary, then BOS
``V``, SEP ``V+1``, EOS ``V+2``, PAD ``V+3`` (``V = vocab_size - 4``); an example is
``BOS x_1 .. x_n SEP y_1 .. y_m EOS`` and the model predicts each ``y`` at the position before
it. Their training offsets the position ids at random; we sample at offset 0, inside that range.

=================  =====================================================  ==============================
kind               x (the source)                                         y (the answers)
=================  =====================================================  ==============================
``sort``           ``n`` distinct tokens                                  x sorted ascending
``unique_copy``    ``n`` distinct tokens                                  x
``unique_reverse`` ``n`` distinct tokens                                  x reversed
``count``          ``start, end`` with ``end = start + n - 1``            ``start, start+1, .., end``
``majority``       ``n`` tokens with one most frequent                    that token (one answer)
``bin_majority``   ``n`` bits (0/1) with no tie                           the majority bit (one answer)
=================  =====================================================  ==============================

Departures, named: each batch has one length ``n`` (theirs vary per example; :func:`drasp_task`
takes ``length``); the EOS prediction after the last answer is not scored; ``count``'s first
answer (``start``, predicted at SEP: a copy of ``x_1``) is not scored either, so that every
scored answer is one where counting on from the token just written (``successor``) and counting
up by position (``count_by_position``) are rival programs.

    >>> model, task = read_drasp("share/saved_models/sort-@1l1h256d3lr01drop", length=10)
    >>> found = circuits.explain.explain(model, task)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from torch import Tensor

from interp_rand.tasks import Batch, TaskSpec

SPECIALS = 4  # BOS, SEP, EOS, PAD after the vocabulary
DEFAULT_LENGTH = 10  # inside every benchmark model's training range (1-50 for these tasks)


def _distinct(n: int, length: int, vocab: int, generator: torch.Generator) -> Tensor:
    if length > vocab:
        raise ValueError(f"length={length} needs {length} distinct tokens; the vocabulary has {vocab}")
    return torch.rand(n, vocab, generator=generator).argsort(1)[:, :length]


def _with_mode(n: int, length: int, vocab: int, generator: torch.Generator) -> Tensor:
    """``n`` rows of ``length`` tokens with one most frequent token (rows with a tie redrawn)."""
    rows = []
    while sum(len(r) for r in rows) < n:
        x = torch.randint(0, vocab, (2 * n, length), generator=generator)
        counts = torch.nn.functional.one_hot(x, vocab).sum(1)
        top = counts.topk(min(2, vocab), dim=1).values
        rows.append(x[top[:, 0] > (top[:, 1] if vocab > 1 else -1)])
    return torch.cat(rows)[:n]


def _count(n: int, length: int, vocab: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    if length > vocab:
        raise ValueError(f"count length={length} counts past the vocabulary of {vocab}")
    start = torch.randint(0, vocab - length + 1, (n,), generator=generator)
    return torch.stack([start, start + length - 1], 1), start[:, None] + torch.arange(length)


def _mode(n: int, length: int, vocab: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    x = _with_mode(n, length, vocab, generator)
    return x, torch.nn.functional.one_hot(x, vocab).sum(1).argmax(1, keepdim=True)


def _each(answer: Callable[[Tensor], Tensor]) -> Callable[..., tuple[Tensor, Tensor]]:
    """A task on ``length`` distinct tokens whose answers are ``answer(x)``."""
    return lambda n, length, vocab, generator: (lambda x: (x, answer(x)))(_distinct(n, length, vocab, generator))


@dataclass(frozen=True)
class Kind:
    """One D-RASP task: ``make(n, length, vocab, generator) -> (x, y)`` the source and the
    answers of ``n`` rows, the primitive families ``explain`` tries, what it is, and how many
    answers from the first are not scored (``count``'s start, a copy predicted at SEP)."""

    make: Callable[..., tuple[Tensor, Tensor]]
    families: tuple[str, ...]
    what: str
    unscored: int = 0


KINDS: dict[str, Kind] = {
    "sort": Kind(_each(lambda x: x.sort(1).values), ("order", "search", "copy"), "sort distinct tokens ascending"),
    "unique_copy": Kind(_each(lambda x: x), ("copy", "position"), "copy distinct tokens"),
    "unique_reverse": Kind(_each(lambda x: x.flip(1)), ("copy", "position"), "reverse distinct tokens"),
    "count": Kind(_count, ("search", "copy", "position"), "count from start to end", unscored=1),
    "majority": Kind(_mode, ("count", "order"), "the most frequent token"),
    "bin_majority": Kind(_mode, ("count", "order"), "the majority bit"),
}


def drasp_task(kind: str, vocab_size: int, length: int = DEFAULT_LENGTH) -> TaskSpec:
    """D-RASP's task ``kind`` (:data:`KINDS`) for a model of ``vocab_size`` token ids, ``length``
    source tokens (``count``: ``length`` answers), in their layout (module docstring)."""
    if kind not in KINDS:
        raise ValueError(f"D-RASP task {kind!r} is not read here; known: {', '.join(KINDS)}")
    if not isinstance(length, int) or length < 1:
        raise ValueError(f"length={length!r} must be a positive integer")
    spec = KINDS[kind]
    V = vocab_size - SPECIALS
    bos, sep = V, V + 1

    def sample(n: int, generator: torch.Generator) -> Batch:
        x, y = spec.make(n, length, V, generator)
        seq = torch.cat([torch.full((n, 1), bos), x, torch.full((n, 1), sep), y], 1)
        inputs, targets = seq[:, :-1], seq[:, 1:]
        first = x.shape[1] + 1  # SEP's position: it predicts y_1
        answers = torch.arange(first + spec.unscored, first + y.shape[1])
        mask = torch.zeros_like(targets, dtype=torch.bool)
        mask[:, answers] = True
        return Batch(inputs, targets, mask, answers)

    x, y = spec.make(1, length, V, torch.Generator().manual_seed(0))  # the layout's widths, from one row
    positions = (["bos"] + [f"x{i + 1}" for i in range(x.shape[1])] + ["sep"]
                 + [f"y{i + 1}" for i in range(y.shape[1] - 1)])
    return TaskSpec(f"drasp-{kind}", sample, positions, families=spec.families, source_start=1,
                    description=f"D-RASP's {kind} ({spec.what}), {length} tokens, BOS x SEP y")


def kind_of(folder: str | Path) -> str:
    """The task of a benchmark model folder, from its name (``sort-@1l1h256d3lr01drop`` -> ``sort``)."""
    name = Path(folder).name
    kind = name.split("-", 1)[0]
    if kind not in KINDS:
        raise ValueError(f"{name}: D-RASP task {kind!r} is not read here; known: {', '.join(KINDS)}")
    return kind


def read_drasp(folder: str | Path, length: int = DEFAULT_LENGTH) -> tuple[Any, TaskSpec]:
    """``(model, task)`` of a D-RASP benchmark model folder (``config.json`` + ``model.safetensors``)."""
    from interp_rand.importers.hf_gpt2 import read_config, read_gpt2

    folder = Path(folder)
    kind = kind_of(folder)
    task = drasp_task(kind, int(read_config(folder)["vocab_size"]), length)
    return read_gpt2(folder).eval(), task


__all__ = ["DEFAULT_LENGTH", "KINDS", "Kind", "drasp_task", "kind_of", "read_drasp"]
