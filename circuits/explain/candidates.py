"""Candidate algorithms: small compositions of primitives that compute a task's answer, kept
when they agree with the model.

A :class:`Candidate` is a primitive (:mod:`circuits.explain.primitives`) applied at every output,
in order or with the outputs reversed (``order_statistic`` at output ``K-1-k`` sorts
descending). :func:`enumerate_candidates` scores each against the model on a batch:

- **match**: the share of (input, output) entries where the candidate's answer is the model's
  argmax, D-RASP's match accuracy (they keep a program at >= 0.9, :data:`MATCH_MIN`);
- **exact**: the share of inputs where it is the model's answer at every output;
- **task accuracy**: the same against the task's targets.

Two candidates that give the same answers on the batch *and* on every off-distribution edit
the decisive experiments would use (each written answer token set to each value seen there)
are one program written twice (``order_statistic`` and ``order_statistic_desc_reversed``): the
simpler name is kept and the other listed in its ``same_as``, so that the search never asks
experiments to separate what cannot differ.

A candidate that agrees with the model is a hypothesis about *what* it computes; the search
then asks where (:mod:`circuits.explain.localise`) and whether a rival that agrees as well is
the one the model follows (:func:`circuits.mechanisms.compare_mechanisms`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from circuits.explain.primitives import Frame, Primitive, primitives_of
from circuits.mechanisms.decisive import edited_positions, set_token, written_edits, written_positions
from circuits.mechanisms.patching import answer_logits
from interp_rand.verdicts import Claim, meets

MATCH_MIN = 0.9


def match_claim(name: str, match: float) -> Claim:
    """``name``'s answer is the model's on at least :data:`MATCH_MIN` of answer entries (D-RASP's bar)."""
    return meets(f"{name}'s answer is the model's answer", match, MATCH_MIN, side="at least",
                 control_label="no control (an agreement bar)", value_name="match")


@dataclass(frozen=True)
class Candidate:
    """A primitive at every output, the outputs in order or reversed."""

    primitive: Primitive
    reverse: bool = False

    @property
    def name(self) -> str:
        return self.primitive.name + ("_reversed" if self.reverse else "")

    def index(self, k: int, n_outputs: int) -> int:
        return n_outputs - 1 - k if self.reverse else k

    def read_position(self, frame: Frame, k: int) -> int:
        """The position a copying primitive reads for output ``k``."""
        return self.primitive.at(frame, self.index(k, frame.n_outputs))

    def answer_at(self, frame: Frame, k: int) -> Tensor:
        return self.primitive.compute(frame, self.index(k, frame.n_outputs)).long()

    def answers(self, batch: Any, task: Any = None) -> Tensor:
        """``[batch, K]`` the candidate's answer at every output."""
        frame = Frame(batch, task)
        return torch.stack([self.answer_at(frame, k) for k in range(frame.n_outputs)], 1)

    @property
    def description(self) -> str:
        text = self.primitive.description
        return text.replace("k-th", "(K-1-k)-th") if self.reverse else text


@dataclass(frozen=True)
class Scored:
    """A candidate's match with the model (per output entry and whole inputs) and with the task."""

    candidate: Candidate
    match: float
    exact: float
    task_accuracy: float
    same_as: tuple[str, ...] = ()

    @property
    def kept(self) -> bool:
        return self.match >= MATCH_MIN

    def line(self) -> str:
        same = f"  (the same program as {', '.join(self.same_as)})" if self.same_as else ""
        return (f"{self.candidate.name:<24} match {self.match:.3f}  exact {self.exact:.3f}  task {self.task_accuracy:.3f}"
                f"  {'kept' if self.kept else '-'}{same}")

    def to_dict(self) -> dict[str, Any]:
        return {"candidate": self.candidate.name, "family": self.candidate.primitive.family,
                "description": self.candidate.description, "match": self.match, "exact": self.exact,
                "task_accuracy": self.task_accuracy, "kept": self.kept, "same_as": list(self.same_as)}


def source_edits(task: Any, batch: Any) -> dict[str, Any]:
    """The decisive experiments' content edits: for each written answer position, every input
    with the token there set to each other token of *its own* source (``{name: batch -> edited
    batch}``). Where the vocabulary is large, "each value seen there" mostly writes a token the
    input does not hold, on which a copying rival is undefined; these edits keep the input's
    tokens, so a program that copies by position and one that copies by content (an induction
    match) part on every one."""
    frame = Frame(batch, task)
    start, stop = frame.start, frame.q(0)
    if stop <= start:
        return {}

    def edit(bt: Any, p: int) -> Any:
        source = bt.inputs[:, start:stop]
        return set_token(bt, p, torch.arange(len(bt)).repeat_interleave(source.shape[1]), source.reshape(-1))

    return {f"written token @{p} set to each other token of its input's source": (lambda bt, p=p: edit(bt, p))
            for p in edited_positions(batch)}


@torch.no_grad()
def model_answers(model: Any, batch: Any) -> Tensor:
    """``[batch, K]`` the model's argmax at every answer position."""
    model.eval()
    return answer_logits(model, batch, torch.arange(len(batch.answer_positions))).argmax(-1)


def enumerate_candidates(model: Any, task: Any, batch: Any, families: tuple[str, ...] | list[str] | None = None,
                         predicted: Tensor | None = None, n_edit_rows: int = 200) -> list[Scored]:
    """Every candidate of the task's families (:func:`primitives_of`) that applies to its
    layout, each in order and reversed, scored on ``batch`` against the model (``predicted``:
    its answers, when known) and the targets; candidates equal on the batch and on the written
    edits of its first ``n_edit_rows`` rows merged (module docstring); best match first."""
    frame = Frame(batch, task)
    predicted = model_answers(model, batch) if predicted is None else predicted
    targets = batch.targets[:, batch.answer_positions]
    probe = batch[torch.arange(min(n_edit_rows, len(batch)))]
    edited = [probe] + [written_edits(probe, p) for p in written_positions(probe)]
    scored: dict[tuple, Scored] = {}
    for primitive in primitives_of(task, families):
        if not primitive.applies(frame):
            continue
        for reverse in (False, True):
            candidate = Candidate(primitive, reverse)
            answers = candidate.answers(batch, task)
            signature = (answers.numpy().tobytes(),) + tuple(candidate.answers(e, task).numpy().tobytes() for e in edited)
            here = Scored(candidate, float((answers == predicted).float().mean()),
                          float((answers == predicted).all(1).float().mean()), float((answers == targets).float().mean()))
            if signature in scored:  # the same program under another name: the simpler name stands for both
                first = scored[signature]
                keep, other = sorted([first, here], key=lambda x: (x.candidate.reverse, len(x.candidate.name)))
                here = dataclasses.replace(keep, same_as=first.same_as + (other.candidate.name,))
            scored[signature] = here
    out = list(scored.values())
    out.sort(key=lambda s: (-s.match, -s.exact, s.candidate.reverse, s.candidate.name))
    return out


__all__ = ["Candidate", "MATCH_MIN", "Scored", "enumerate_candidates", "match_claim", "model_answers", "source_edits"]
