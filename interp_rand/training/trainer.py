"""The task-aware training loop.

Answer-masked objective, AdamW, warm-up + cosine schedule, gradient clipping, periodic
evaluation (exact match and per-position accuracy) on a fixed held-out batch, a progress bar,
atomic checkpoints and resume. On CPU the same :class:`TrainConfig` seed gives bitwise-identical
weights, whether the run went straight through or was killed and resumed.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from interp_rand.training.checkpoint import (
    BOOKKEEPING_FIELDS,
    TRAINER_FILE,
    CheckpointError,
    RunSpec,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
    step_dir,
)
from interp_rand.evaluation import EvalResult, check_model_fits_task, evaluate
from interp_rand.model.config import ModelConfig
from interp_rand.model.transformer import HookedTransformer
from interp_rand.tasks.base import Task
from interp_rand.tasks.lengths import check_training_lengths, training_task
from interp_rand.run_history import METRICS_FILE, read_metrics
from interp_rand.training.checkpoint_schedule import is_checkpoint_step
from interp_rand.training.config import TrainConfig
from interp_rand.training.interrupts import TrainingInterrupted, _SecondSignal, stop_signals
from interp_rand.training.objectives import fixed_seeds_if_asked, make_objective
from interp_rand.output.lock import run_lock
from interp_rand.training.schedule import warmup_cosine
from interp_rand.output.files import append_line, json_text, write_text
from interp_rand.output.folder import recover_folders

# The evaluation set's generator is offset from the training seed so the two streams differ.
_EVAL_SEED_OFFSET = 1_000_003
#: Besides every ``eval_every`` steps, a run is evaluated at the powers of two from this step up
#: to ``eval_every`` (16, 32, 64, 128 for the default 250), so its curve shows the learning phase.
EARLY_EVAL_FROM = 16


def is_eval_step(step: int, cfg: TrainConfig) -> bool:
    """Is ``step`` evaluated: every ``cfg.eval_every`` steps, the last step, and the early
    log-spaced steps (:data:`EARLY_EVAL_FROM`, 2x, 4x, ... below ``eval_every``). The early ones
    only record the curve: the stop rule (``stop_at_exact_match``) is judged on the regular
    cadence, so a run stops where it did before they were added."""
    early = EARLY_EVAL_FROM <= step < cfg.eval_every and step & (step - 1) == 0
    return judges_stop(step, cfg) or early


def judges_stop(step: int, cfg: TrainConfig) -> bool:
    """Is ``step`` an evaluation of the regular cadence (every ``eval_every`` steps, the last
    step), the ones the stop rule is judged on?"""
    return step % cfg.eval_every == 0 or step == cfg.steps


def _initialise_from(model: HookedTransformer, source: str, spec: RunSpec) -> None:
    """Copy the weights of the checkpoint ``source`` into ``model`` (a model of the same task
    and model config only; the refusal names the task, or the model fields that differ)."""
    checkpoint = load_checkpoint(source)
    theirs = checkpoint.spec
    if (theirs.task_name, theirs.task_config) != (spec.task_name, spec.task_config):
        raise CheckpointError(
            f"init_from={source!r} is a model of the {theirs.task_name!r} task ({_options(theirs.task_config)}); "
            f"this run trains {spec.task_name!r} ({_options(spec.task_config)}): start from a run of the same task"
        )
    if theirs.model_config != model.cfg:
        mine, other = model.cfg.to_dict(), theirs.model_config.to_dict()
        differ = ", ".join(f"{k} {other[k]!r} (this run: {mine[k]!r})" for k in mine if mine[k] != other[k])
        raise CheckpointError(f"init_from={source!r} has another model: {differ}; its model options must equal "
                              "this run's")
    model.load_state_dict(checkpoint.model().state_dict())


def _options(config: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in config.items()) or "no options"


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the last good checkpoint is left untouched."""


@dataclass
class TrainResult:
    run_dir: Path
    step: int
    model: HookedTransformer
    last_eval: EvalResult | None
    history: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    resumed_from: Path | None = None  # the checkpoint this run continued from


def train(
    task: Task,
    model_config: ModelConfig,
    train_config: TrainConfig,
    run_dir: str | Path,
    *,
    resume: bool = True,
    progress: bool = True,
) -> TrainResult:
    """Train a model on ``task`` into ``run_dir``; continue from its last checkpoint if any.

    The run holds ``run_dir``'s lock (:mod:`~interp_rand.output.lock`) throughout: one
    writer per run folder. A resume says on stderr which step and checkpoint it continues from.
    SIGINT/SIGTERM end the run after the current step with a checkpoint at that step
    (:mod:`~interp_rand.training.interrupts`); calling ``train`` again resumes from it.

    Raises:
        CheckpointError: ``run_dir`` holds checkpoints of another task/model, or ``resume`` is
            false and it holds checkpoints at all.
        TrainingDiverged: the loss became non-finite (names the step).
        RunLocked: another process is writing ``run_dir`` (names its pid and start time).
        RunWriteError: the folder, a checkpoint or the metrics could not be written (says what
            and why); the last good checkpoint is left whole.
        TrainingInterrupted: a SIGINT/SIGTERM stopped the run (a ``KeyboardInterrupt``
            carrying the step, the checkpoint and the exit code 130/143).
    """
    run_dir = Path(run_dir)
    cfg = train_config
    spec = RunSpec(task.name, task.config_dict(), model_config, cfg)
    objective = make_objective(cfg)
    if hasattr(objective, "check"):  # before the lock and the progress bar: a refusal costs nothing
        objective.check(task)
    check_training_lengths(task, cfg.min_length)
    model = HookedTransformer(model_config, seed=cfg.seed)
    check_model_fits_task(model, task)
    model.train()
    optimizer = make_optimizer(model, cfg)
    generator = torch.Generator().manual_seed(cfg.seed)
    with run_lock(run_dir):
        start, resumed_from, resumed_loss = (_resume(run_dir, spec, model, optimizer, generator) if resume
                                             else _refuse_existing(run_dir))
        if start == 0 and cfg.init_from is not None:
            _initialise_from(model, cfg.init_from, spec)
        history = _read_history(run_dir, up_to=start)
        # A run that already stopped at its target has nothing left to do.
        reached = bool(start and history and cfg.stop_at_exact_match is not None
                       and isinstance(history[-1].get("exact_match"), (int, float))
                       and history[-1]["exact_match"] >= cfg.stop_at_exact_match
                       and judges_stop(history[-1]["step"], cfg))
        if resumed_from is not None:
            left = "nothing left to train" if reached or start >= cfg.steps else f"training to step {cfg.steps}"
            print(f"resuming {run_dir} from step {start} ({resumed_from}); {left}", file=sys.stderr, flush=True)
        eval_batch = task.sample(cfg.eval_size, torch.Generator().manual_seed(cfg.seed + _EVAL_SEED_OFFSET))
        # a fixed-seed (r0) model is judged on r0, the only seed it is ever given
        eval_batch = fixed_seeds_if_asked(task, eval_batch, cfg)

        last_eval: EvalResult | None = None
        # the running train loss goes on from where the checkpoint left it, so a resumed run's
        # metrics.jsonl is line for line that of one uninterrupted run
        running_loss: float | None = resumed_loss
        # the steps' losses not yet read: folded into running_loss (the same float arithmetic,
        # in step order) only where it is shown or saved, not converted to a float every step
        unread: list[torch.Tensor] = []

        def read_losses() -> float | None:
            nonlocal running_loss
            for value in unread:
                value = value.item()
                running_loss = value if running_loss is None else 0.9 * running_loss + 0.1 * value
            unread.clear()
            return running_loss

        saved_at = start

        def save(at: int) -> Path:
            nonlocal saved_at
            read_losses()
            metrics = last_eval.to_dict() if last_eval else {}
            path = save_checkpoint(
                run_dir, at, spec, model.state_dict(),
                _trainer_state(model, optimizer, generator), {"train_loss": running_loss, **metrics},
                keep=cfg.keep_checkpoints,
            )
            saved_at = at
            return path

        began = time.perf_counter()
        bar = tqdm(total=cfg.steps, initial=start, desc=f"train {task.name}", disable=not progress, unit="step")
        step = start
        with stop_signals() as signals:
            try:
                while step < cfg.steps and not reached:
                    lr = warmup_cosine(step, peak=cfg.lr, warmup=cfg.warmup_steps, total=cfg.steps,
                                       floor_ratio=cfg.min_lr_ratio)
                    for group in optimizer.param_groups:
                        group["lr"] = lr
                    step_task = training_task(task, cfg.min_length, cfg.length_curriculum, step, generator)
                    batch = step_task.sample(cfg.batch_size, generator)
                    try:
                        loss = training_step(model, optimizer, objective, task, batch, generator, step, cfg.grad_clip)
                    except NonFiniteStep as err:
                        raise _diverged(str(err), step + 1, run_dir) from None
                    step += 1
                    unread.append(loss.detach())
                    bar.update(1)

                    stop = False
                    if is_eval_step(step, cfg):
                        try:
                            last_eval = evaluate(model, task, eval_batch)
                        except FloatingPointError as err:
                            raise _diverged(str(err), step, run_dir) from None
                        record = {"step": step, "lr": lr, "train_loss": read_losses(), **last_eval.to_dict()}
                        history.append(record)
                        _append_history(run_dir, record)
                        bar.set_postfix(loss=f"{running_loss:.4f}", exact=f"{last_eval.exact_match:.4f}")
                        stop = (cfg.stop_at_exact_match is not None and last_eval.exact_match >= cfg.stop_at_exact_match
                                and judges_stop(step, cfg))
                    elif step % 10 == 0:
                        bar.set_postfix(loss=f"{read_losses():.4f}")
                    if is_checkpoint_step(cfg, step) or stop:
                        save(step)
                    if stop:
                        break
                    if signals.signum is not None:  # a stop was asked for during this step
                        path = step_dir(run_dir, step) if saved_at == step else save(step)
                        raise TrainingInterrupted(signals.signum, step, run_dir, path, saved=True)
            except _SecondSignal as err:  # a second signal: stop now, keep what is on disk
                raise TrainingInterrupted(err.signum, step, run_dir, latest_checkpoint(run_dir), saved=False) from None
            finally:
                bar.close()
    model.eval()
    return TrainResult(run_dir, step, model, last_eval, history, time.perf_counter() - began, resumed_from)


# --------------------------------------------------------------------------------------
class NonFiniteStep(FloatingPointError):
    """A training step met a NaN or infinite loss or gradient norm (the message says which)."""


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """The trainer's AdamW over ``model``'s parameters, with ``cfg``'s settings."""
    return torch.optim.AdamW(
        model.parameters(),
        lr=cfg.lr,
        betas=(cfg.beta1, cfg.beta2),
        eps=cfg.adam_eps,
        weight_decay=cfg.weight_decay,
    )


def training_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    objective,
    task: Task,
    batch,
    generator: torch.Generator,
    step: int,
    grad_clip: float | None,
) -> torch.Tensor:
    """One optimiser step of the trainer on ``batch``: the objective, its gradient, clipping to
    ``grad_clip`` (``None``/0: no clipping) and the AdamW update; returns the loss (a 0-d
    tensor, not synchronised). The trainer runs exactly this; ``bench/throughput.py`` times it.

    Raises:
        NonFiniteStep: the loss (before any update) or the gradient norm (before the update)
            is NaN or infinite; the model is left unchanged.
    """
    loss = objective(model, task, batch, generator, step=step)
    if not torch.isfinite(loss):
        raise NonFiniteStep(f"loss became {loss.item()}")
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip or float("inf"))
    if not torch.isfinite(grad_norm):
        raise NonFiniteStep(f"gradient norm became {grad_norm.item()}")
    optimizer.step()
    return loss


def _diverged(what: str, step: int, run_dir: Path) -> TrainingDiverged:
    return TrainingDiverged(
        f"{what} at step {step}; stopped without writing a checkpoint. "
        f"Last good checkpoint: {latest_checkpoint(run_dir) or 'none'}"
    )


def _refuse_existing(run_dir: Path) -> tuple[int, None, None]:
    found = latest_checkpoint(run_dir)
    if found is not None:
        raise CheckpointError(
            f"{run_dir} already holds checkpoints ({found.name}); resume it or choose another folder"
        )
    return 0, None, None


def _resume(run_dir: Path, spec: RunSpec, model, optimizer,
            generator: torch.Generator) -> tuple[int, Path | None, float | None]:
    """Load the newest checkpoint into the model, optimizer and generator; return its step,
    folder and running train loss (``0, None, None``: nothing to resume)."""
    recover_folders(run_dir / "checkpoints")  # what a save killed mid-way left
    found = latest_checkpoint(run_dir)
    if found is None:
        return 0, None, None
    ckpt = load_checkpoint(found)
    mine, theirs = spec.to_dict(), ckpt.spec.to_dict()
    # A resumed run may change its length and bookkeeping; whatever shapes the weights must match.
    for config in (mine["train"], theirs["train"]):
        for key in BOOKKEEPING_FIELDS:
            config.pop(key)
    if mine != theirs:
        diff = {
            section: {"checkpoint": theirs[section], "requested": mine[section]}
            for section in mine
            if mine[section] != theirs[section]
        }
        raise CheckpointError(
            f"{found} belongs to a different run; differing sections: {json.dumps(diff)}. "
            "Use another output folder or the same settings."
        )
    model.load_state_dict(ckpt.model().state_dict())
    state = ckpt.trainer_state()
    check_trainer_state(state, model, generator, found / TRAINER_FILE)
    generator.set_state(state.pop("generator"))
    for name, param in model.named_parameters():
        prefix = f"adamw.{name}."
        entries = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
        if entries:
            optimizer.state[param] = entries
    loss = ckpt.metrics.get("train_loss") if isinstance(ckpt.metrics, dict) else None
    return ckpt.step, found, float(loss) if isinstance(loss, (int, float)) and not isinstance(loss, bool) else None


# What AdamW keeps per parameter: its step count and the gradient's two running means.
_ADAMW_ENTRIES = ("step", "exp_avg", "exp_avg_sq")


def check_trainer_state(state: dict[str, torch.Tensor], model, generator: torch.Generator, file: Path) -> None:
    """:class:`CheckpointError` naming ``file`` unless ``state`` (a ``trainer.safetensors``,
    :func:`_trainer_state`'s format) fits this run: a data generator state of this torch's size
    and AdamW entries only for ``model``'s parameters, of their shapes (an optimizer of another
    run, e.g. one with more layers, or a truncated generator state, is refused)."""
    expected = generator.get_state()
    rng = state.get("generator")
    if rng is None or rng.dtype != expected.dtype or rng.shape != expected.shape:
        got = "none" if rng is None else f"{rng.numel()} {str(rng.dtype).replace('torch.', '')} values"
        raise CheckpointError(f"{file}: the data generator's state is {got}, not the {expected.numel()} bytes "
                              "of a torch CPU generator: the file is damaged or not this run's")
    params = dict(model.named_parameters())
    foreign, wrong = [], []
    for key, value in state.items():
        if key == "generator":
            continue
        name, _, entry = key.removeprefix("adamw.").rpartition(".")
        if not key.startswith("adamw.") or name not in params or entry not in _ADAMW_ENTRIES:
            foreign.append(key)
        elif entry != "step" and value.shape != params[name].shape:
            wrong.append(f"{key} {tuple(value.shape)} (parameter {tuple(params[name].shape)})")
    # A parameter without AdamW state got no gradient; the same parameter of another layer
    # that has state did, so a layer without any is one the optimizer's model did not have.
    kind = functools.partial(re.sub, r"^blocks\.\d+\.", "blocks.*.")
    stated = {key.removeprefix("adamw.").rpartition(".")[0] for key in state if key != "generator"}
    missing = [name for name in params if name not in stated and any(kind(name) == kind(s) for s in stated)]
    if foreign or wrong or missing:
        what = "; ".join(filter(None, [
            f"{len(foreign)} entries for parameters this model does not have ({', '.join(foreign[:3])}"
            f"{', ...' if len(foreign) > 3 else ''})" if foreign else "",
            f"no entries for {len(missing)} of its parameters ({', '.join(missing[:3])}"
            f"{', ...' if len(missing) > 3 else ''})" if missing else "",
            f"wrong shapes: {', '.join(wrong[:3])}{', ...' if len(wrong) > 3 else ''}" if wrong else ""]))
        raise CheckpointError(f"{file} is the optimizer state of another model: {what}; it does not match this "
                              "run's config (a trainer.safetensors copied from another run?)")


def _trainer_state(model, optimizer, generator: torch.Generator) -> dict[str, torch.Tensor]:
    out = {"generator": generator.get_state()}
    for name, param in model.named_parameters():
        for key, value in optimizer.state.get(param, {}).items():
            out[f"adamw.{name}.{key}"] = value if torch.is_tensor(value) else torch.tensor(value)
    return out


def _read_history(run_dir: Path, up_to: int) -> list[dict[str, Any]]:
    """Evaluation records up to the resumed step (later ones belong to lost steps)."""
    path = run_dir / METRICS_FILE
    if not path.exists():
        return []
    records = read_metrics(path)  # a torn last record (a write cut short) is dropped, and said
    kept = [r for r in records if r["step"] <= up_to]
    write_text(path, "".join(json_text(r, None) + "\n" for r in kept), what="the metrics file")
    return kept


def _append_history(run_dir: Path, record: dict[str, Any]) -> None:
    append_line(run_dir / METRICS_FILE, json_text(record, None), what="the metrics file")
