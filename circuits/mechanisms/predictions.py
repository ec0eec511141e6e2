"""Predictions of a mechanism, measured: the model's accuracy where the mechanism says it
should fail or succeed, beside its accuracy everywhere else.

A prediction names its inputs (an enumeration or a search, :attr:`Prediction.inputs`; default
the card's evaluation batch), a selector ``where(batch, values)`` and the outputs it is about
(:attr:`Prediction.outputs`). The model is correct on an example when :attr:`Mechanism.correct`
says so at those outputs (default: the argmax equals the target at every one of them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from circuits.mechanisms.hypothesis import Mechanism, Prediction
from circuits.mechanisms.patching import answer_logits


@dataclass
class PredictionCheck:
    """Accuracy where the prediction applies (``n_where`` examples) and elsewhere."""

    name: str
    description: str
    expect: str
    threshold: float
    accuracy_where: float
    accuracy_elsewhere: float
    n_where: int
    n_elsewhere: int

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


#: rows per forward of :func:`correct_rows`: a prediction's inputs may be a whole input space
#: (sort's 100,000 lists), whose one forward held 4 GB of activations
CHUNK_ROWS = 4096


@torch.no_grad()
def correct_rows(model: Any, mech: Mechanism, batch: Any, only: tuple[int, ...] | None = None) -> torch.Tensor:
    """``[batch]`` bool: is the model right on each example at the mechanism's outputs (at the
    outputs ``only``, indices into them, when given); the forwards in chunks of
    :data:`CHUNK_ROWS` rows."""
    outputs = torch.tensor(mech.outputs)
    starts = range(0, len(batch), CHUNK_ROWS) or [0]  # (an empty batch: one empty forward)
    predicted = torch.cat([answer_logits(model, batch[start:start + CHUNK_ROWS], outputs).argmax(-1)
                           for start in starts])
    return mech.correct_of(batch, predicted, only)


def check_prediction(model: Any, task: Any, mech: Mechanism, prediction: Prediction, batch: Any,
                     generator: torch.Generator) -> PredictionCheck:
    """Measure ``prediction`` on its own inputs, or on ``batch`` when it names none."""
    inputs = batch if prediction.inputs is None else prediction.inputs(task, generator)
    values = mech.values(inputs)
    where = prediction.where(inputs, values).bool()
    if where.shape != (len(inputs),):
        raise ValueError(f"prediction {prediction.name!r}: where() must give a [batch] bool tensor; got {tuple(where.shape)}")
    correct = correct_rows(model, mech, inputs, prediction.outputs).float()

    def mean(mask: torch.Tensor) -> float:
        return float(correct[mask].mean()) if bool(mask.any()) else float("nan")

    return PredictionCheck(prediction.name, prediction.description, prediction.expect, prediction.threshold,
                           mean(where), mean(~where), int(where.sum()), int((~where).sum()))


__all__ = ["PredictionCheck", "check_prediction", "correct_rows"]
