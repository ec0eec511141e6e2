"""Training: config, objectives (registry), schedule, answer-masked losses and the loop, with
one writer per run folder (``run_lock``) and safe stops on SIGINT/SIGTERM."""

from interp_rand.training.config import TrainConfig
from interp_rand.training.checkpoint import Checkpoint, CheckpointError, RunSpec, load_checkpoint
from interp_rand.losses import answer_correct, answer_loss
from interp_rand.training.objectives import ERM, Objective, make_objective, objective_names, register_objective
from interp_rand.training.qnorm import QNorm, q_norm
from interp_rand.training.interrupts import TrainingInterrupted
from interp_rand.output.lock import RunLocked, run_lock
from interp_rand.training.trainer import TrainResult, TrainingDiverged, train
from interp_rand.output.write_error import RunWriteError

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "RunLocked",
    "RunSpec",
    "RunWriteError",
    "load_checkpoint",
    "ERM",
    "Objective",
    "QNorm",
    "TrainConfig",
    "TrainResult",
    "TrainingDiverged",
    "TrainingInterrupted",
    "answer_correct",
    "answer_loss",
    "make_objective",
    "objective_names",
    "q_norm",
    "register_objective",
    "run_lock",
    "train",
]
