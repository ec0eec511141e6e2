"""interp-rand: train TransformerLens-hooked transformers on algorithmic and randomized tasks.

Main nouns and verbs::

    from interp_rand import HookedTransformer, ModelConfig, make_task, TrainConfig, train
    from interp_rand import load_checkpoint, evaluate
    from interp_rand.model.bridge import to_bridge   # TransformerLens TransformerBridge
"""

from interp_rand.evaluation import EvalResult, evaluate
from interp_rand.model import HookedTransformer, ModelConfig
from interp_rand.tasks import Batch, PairBatch, Task, make_task, task_names
from interp_rand.training import TrainConfig, TrainResult, load_checkpoint, train

__all__ = [
    "Batch",
    "EvalResult",
    "HookedTransformer",
    "ModelConfig",
    "PairBatch",
    "Task",
    "TrainConfig",
    "TrainResult",
    "evaluate",
    "load_checkpoint",
    "make_task",
    "task_names",
    "train",
]
