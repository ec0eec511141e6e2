"""interp-rand: train TransformerLens-hooked transformers on algorithmic and randomized tasks.

Main nouns and verbs::

    from interp_rand import HookedTransformer, ModelConfig, make_task, TrainConfig, train
    from interp_rand import load_checkpoint, evaluate, set_threads
    from interp_rand.model.bridge import to_bridge   # TransformerLens TransformerBridge

The names are imported on first use (PEP 562), so that ``import interp_rand`` and the command
line's ``--help`` do not pay for importing torch and TransformerLens.
"""

from __future__ import annotations

import importlib
from typing import Any

from interp_rand.threads import DEFAULT_THREADS, set_threads, use_threads

# name -> the module that defines it
_LAZY = {
    "EvalResult": "interp_rand.evaluation",
    "evaluate": "interp_rand.evaluation",
    "HookedTransformer": "interp_rand.model",
    "ModelConfig": "interp_rand.model",
    "Batch": "interp_rand.tasks",
    "PairBatch": "interp_rand.tasks",
    "Task": "interp_rand.tasks",
    "make_task": "interp_rand.tasks",
    "task_names": "interp_rand.tasks",
    "TrainConfig": "interp_rand.training",
    "TrainResult": "interp_rand.training",
    "load_checkpoint": "interp_rand.training",
    "train": "interp_rand.training",
}

__all__ = sorted([*_LAZY, "DEFAULT_THREADS", "set_threads", "use_threads"])


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # imported once
        return value
    raise AttributeError(f"module 'interp_rand' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
