"""Checkpoints: safetensors for tensors, JSON for everything else, written atomically.

A run directory holds ``checkpoints/step_XXXXXXX/`` folders, each complete in itself:

- ``model.safetensors``: the model's ``state_dict`` (TransformerLens names);
- ``trainer.safetensors``: AdamW moments and the data generator's state (for resume); a
  weights-only checkpoint (the zoo's) leaves it out and cannot be resumed;
- ``checkpoint.json``: format tag, step, task/model/training configs, last metrics; a run trained
  on one fixed seed also stores that seed (``"r0"``, its bits), checked against its task on load;
  an imported model stores where it came from (``"provenance"``, :mod:`interp_rand.importers`);
  ``"forward_check"`` holds the model's answers on a small fixed batch of its task
  (:func:`forward_check`), which :meth:`Checkpoint.model` runs again: architecture claims the
  weights' shapes cannot tell apart (softmax or linear attention, the mask, the positions) are
  checked against the weights themselves. A checkpoint written before it has none and loads as
  before.

``load_checkpoint("zoo:NAME")`` reads a model of the packaged zoo (``interp_rand.zoo``).

A folder is written under a temporary name and renamed into place
(:func:`interp_rand.output.folder.replace_folder`), so a killed run leaves either a whole
checkpoint or none; a failed write (full disk, read-only) raises
:class:`~interp_rand.output.write_error.RunWriteError` and leaves the earlier ones whole.
Nothing is unpickled on load: safetensors and JSON only.
"""

from __future__ import annotations

import dataclasses

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from interp_rand.display import Displayed
from interp_rand.evaluation import EvalResult
from interp_rand.model.config import ModelConfig
from interp_rand.model.transformer import HookedTransformer
from interp_rand.tasks.base import Task, make_task, task_names
from interp_rand.training.checkpoint_schedule import keeps_all
from interp_rand.training.config import TrainConfig
from interp_rand.output.files import file_mode, write_json
from interp_rand.output.folder import replace_folder
from interp_rand.output.write_error import writing
from interp_rand.run_names import CHECKPOINTS_DIR, resolve_run

FORMAT = "interp-rand/checkpoint"
VERSION = 1
MODEL_FILE = "model.safetensors"
TRAINER_FILE = "trainer.safetensors"
META_FILE = "checkpoint.json"
# RUN/checkpoints/step_XXXXXXX (the folder's name and reading a path back, run_of: run_names)
_PREFIX = "step_"
# Training settings that do not change the weights a step produces; a resume may change them.
# (``steps`` changes the cosine schedule of the steps still to come, not of those taken.)
BOOKKEEPING_FIELDS = ("steps", "stop_at_exact_match", "eval_every", "eval_size", "checkpoint_every",
                      "keep_checkpoints", "checkpoint_schedule")


class CheckpointError(ValueError):
    """A checkpoint is missing, truncated, foreign or does not fit what it is loaded into."""


@dataclass(frozen=True)
class RunSpec:
    """Everything needed to rebuild a run: the task, the model and the training config."""

    task_name: str
    task_config: dict[str, Any]
    model_config: ModelConfig
    train_config: TrainConfig

    def make_task(self) -> Task:
        return make_task(self.task_name, **self.task_config)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": {"name": self.task_name, "config": self.task_config},
            "model": self.model_config.to_dict(),
            "train": self.train_config.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunSpec":
        return cls(
            task_name=data["task"]["name"],
            task_config=dict(data["task"]["config"]),
            model_config=ModelConfig.from_dict(data["model"]),
            train_config=TrainConfig.from_dict(data["train"]),
        )


@dataclass(frozen=True, repr=False)
class Checkpoint(Displayed):
    """A loaded ``checkpoint.json`` (the weights load on :meth:`model`). In a notebook: the
    task, step and stored held-out evaluation in one line, and the accuracy per answer position
    as bars. (Its run's training curve is ``interp-rand curve`` or
    :func:`interp_rand.figures.training_curve.training_curve_figure`: the training layer draws
    nothing.)"""

    path: Path
    step: int
    spec: RunSpec
    metrics: dict[str, Any]
    forward_check: dict[str, Any] | None = None

    def evaluation(self) -> Any:
        """The held-out evaluation stored with the checkpoint as an
        :class:`~interp_rand.evaluation.EvalResult` (``None`` when it stores none)."""
        m = self.metrics
        if not all(k in m for k in ("n_examples", "loss", "exact_match", "per_position")):
            return None
        return EvalResult(n_examples=m["n_examples"], loss=m["loss"], exact_match=m["exact_match"],
                          per_position=list(m["per_position"]), breakdown=dict(m.get("breakdown", {})))

    def headline(self) -> str:
        """One line: the task with its options, the step, and the stored held-out evaluation."""
        options = ", ".join(f"{k} {v}" for k, v in self.spec.task_config.items())
        task = f"{self.spec.task_name}" + (f" ({options})" if options else "")
        evaluation = self.evaluation()
        return f"{task} at step {self.step}: " + ("no stored evaluation" if evaluation is None else
                                                 f"held-out {evaluation.headline()}")

    def lines(self) -> list[str]:
        """The headline, the folder, the model and training configs in brief, the forward check."""
        m, t = self.spec.model_config, self.spec.train_config
        mlp = "attention only" if m.attn_only else f"d_mlp {m.d_mlp}"
        out = [self.headline(), f"folder: {self.path}",
               f"model: {m.n_layers} layers x {m.n_heads} heads, d_model {m.d_model}, {mlp}; {m.attention} attention, "
               f"{m.mask} mask, positions {m.positional}" + (f", seed width {m.d_seed}" if m.d_seed else ""),
               f"training: {t.objective} objective, {t.seed_source} seeds, {t.steps} steps"
               + ("" if self.metrics.get("train_loss") is None else f", last training loss {self.metrics['train_loss']:.4g}"),
               "forward check: " + ("stored (the weights must give its answers back on load)"
                                    if self.forward_check is not None else "none (an older checkpoint)")]
        evaluation = self.evaluation()
        return out + ([] if evaluation is None else evaluation.lines()[1:])

    def small_figure(self) -> str | None:
        """The stored evaluation's accuracy per answer position as bars."""
        evaluation = self.evaluation()
        return None if evaluation is None else evaluation.small_figure()

    def model(self) -> HookedTransformer:
        """The model with this checkpoint's weights, in eval mode; where the checkpoint stores a
        forward check (:func:`forward_check`), the model must reproduce it
        (:func:`verify_forward_check`, :class:`CheckpointError` naming the field suspected)."""
        model = load_model(self.path, self.spec.model_config)
        if self.forward_check is not None:
            verify_forward_check(self.path / META_FILE, self.spec, model, self.forward_check)
        return model

    def trainer_state(self) -> dict[str, torch.Tensor]:
        """AdamW moments and the data generator's state; :class:`CheckpointError` for a
        weights-only checkpoint, which cannot be resumed."""
        if not (self.path / TRAINER_FILE).exists():
            raise CheckpointError(
                f"{self.path} is a weights-only checkpoint (no {TRAINER_FILE}): it can be analysed "
                "or used as init_from, not resumed; train into another folder"
            )
        return _load_tensors(self.path / TRAINER_FILE)


def step_dir(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / CHECKPOINTS_DIR / f"{_PREFIX}{step:07d}"


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoint folders of a run, oldest first."""
    folder = Path(run_dir) / CHECKPOINTS_DIR
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and p.name.startswith(_PREFIX))


def latest_checkpoint(run_dir: Path) -> Path | None:
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def save_checkpoint(
    run_dir: Path,
    step: int,
    spec: RunSpec,
    model_state: dict[str, torch.Tensor],
    trainer_state: dict[str, torch.Tensor],
    metrics: dict[str, Any],
    keep: int,
) -> Path:
    """Write a checkpoint atomically and prune all but the newest ``keep`` of its series.

    The series is the run the checkpoint belongs to (:func:`series_key`); pruning never touches
    checkpoints of another series, nor folders it cannot read. A run with a dynamics schedule
    (``checkpoint_schedule`` ``log:N`` or ``even:N``,
    :func:`~interp_rand.training.checkpoint_schedule.keeps_all`) prunes nothing: every
    checkpoint it writes is kept for a replay over them. A failed write raises
    ``RunWriteError`` (what, where, why) and leaves every earlier checkpoint whole."""
    final = step_dir(run_dir, step)
    previous = latest_checkpoint(run_dir)
    untouched = f"the last good checkpoint {previous or '(none yet)'} is untouched"
    meta = {"format": FORMAT, "version": VERSION, "step": step, **spec.to_dict(), **fixed_seed_entry(spec),
            "metrics": metrics, **forward_check_entry(spec, model_state)}
    with writing("checkpoint", final, untouched), replace_folder(final) as tmp:
        write_tensors(tmp / MODEL_FILE, _contiguous(model_state), weights_metadata(spec.model_config))
        write_tensors(tmp / TRAINER_FILE, _contiguous(trainer_state))
        write_json(tmp / META_FILE, meta)
    train = meta.get("train")  # a grid-world agent's spec records no schedule: it prunes
    if isinstance(train, dict) and keeps_all(train.get("checkpoint_schedule", "every")):
        return final
    series = series_key(meta)
    with writing("the run folder (pruning old checkpoints)", final.parent):
        own = [p for p in list_checkpoints(run_dir) if p == final or _series_of(p) == series]
        for stale in own[:-keep]:
            if stale != final:
                shutil.rmtree(stale)
    return final


def write_tensors(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> None:
    """``tensors`` as safetensors at ``path`` (in a new folder: no link to follow), with the mode
    the user's umask gives any other file (safetensors itself writes ``0o600``, so weights beside
    a ``0o644`` checkpoint.json could not be read by the group that reads the JSON)."""
    save_file(tensors, path, metadata=metadata)
    os.chmod(path, file_mode())


def fixed_seed_entry(spec: RunSpec) -> dict[str, Any]:
    """``{"r0": [bits]}`` for a run trained on one fixed seed whose seed is known, else ``{}``
    (also for a spec of another trainer, e.g. the grid world's agents)."""
    if getattr(getattr(spec, "train_config", None), "seed_source", None) != "fixed":
        return {}
    try:
        return {"r0": [float(b) for b in spec.make_task().fixed_seed().reshape(-1).tolist()]}
    except ValueError:  # r0 not known (an imported model): nothing to store, evaluation refuses it
        return {}


def _check_fixed_seed(meta_path: Path, meta: dict[str, Any], spec: RunSpec) -> None:
    """A stored ``r0`` must be the seed its task gives (else the model would be run at another)."""
    if "r0" not in meta:
        return
    expected = fixed_seed_entry(spec).get("r0")
    if expected != meta["r0"]:
        raise CheckpointError(f"{meta_path} stores r0={meta['r0']} but its task gives {expected}: "
                              "set the task's r0 to the stored seed")


def series_key(meta: dict[str, Any]) -> str:
    """What makes checkpoints one series: task, model and the training settings that shape the
    weights (not the bookkeeping ones a resume may change, :data:`BOOKKEEPING_FIELDS`)."""
    train = {k: v for k, v in (meta.get("train") or {}).items() if k not in BOOKKEEPING_FIELDS}
    return json.dumps({"task": meta.get("task"), "model": meta.get("model"), "train": train}, sort_keys=True)


def _series_of(path: Path) -> str | None:
    try:
        meta = json.loads((path / META_FILE).read_text())
    except (OSError, ValueError):
        return None
    return series_key(meta) if isinstance(meta, dict) else None


def load_checkpoint(path: str | Path, task: str | None = None) -> Checkpoint:
    """Read a checkpoint folder, or the newest checkpoint of a run directory.

    ``"zoo:NAME"`` names a model of the packaged zoo; ``task`` (a task name) refuses a run of
    any other task. Raises :class:`CheckpointError` naming the file and what is wrong.
    """
    given = path
    path, meta = read_meta(path)
    meta_path = path / META_FILE
    task_meta = meta.get("task")
    task_name = task_meta.get("name") if isinstance(task_meta, dict) else None
    if task_name not in task_names():
        # a run of another trainer says so in its training config: the grid world's PGPE agents
        # (``AgentRunSpec``) record ``train: {"agent", "pgpe"}``
        agent = isinstance(meta.get("train"), dict) and "pgpe" in meta["train"]
        raise CheckpointError(
            f"{meta_path} holds a {task_name!r} run, not one of the trainer's tasks ({', '.join(task_names())})"
            + ("; read grid-world agents with `interp-rand gridworld eval`" if agent else "")
        )
    try:
        spec = RunSpec.from_dict(meta)
        step = int(meta["step"])
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"{meta_path} has an invalid config: {err}") from None
    if not (path / MODEL_FILE).exists():
        raise CheckpointError(f"{path / MODEL_FILE} is missing")
    _check_fixed_seed(meta_path, meta, spec)
    if task is not None and spec.task_name != task:
        raise CheckpointError(f"{given} is a model of the {spec.task_name!r} task, not {task!r}")
    check = meta.get(FORWARD_CHECK_KEY)
    if check is not None and not _valid_check(check):
        raise CheckpointError(f"{meta_path}: its {FORWARD_CHECK_KEY!r} entry is malformed (expected n, seed, inputs, "
                              "answers, exact_match); remove the entry to load the weights unchecked")
    return Checkpoint(path=path, step=step, spec=spec, metrics=meta.get("metrics", {}), forward_check=check)


def read_meta(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """The checkpoint folder ``path`` names (itself, the newest checkpoint of a run directory,
    or a zoo model for ``"zoo:NAME"``) and its ``checkpoint.json``, checked to be this build's
    format and version. The one reader of checkpoint metadata: :func:`load_checkpoint` and the
    grid world's ``load_agent`` add what their task needs. Raises :class:`CheckpointError`
    naming the file and what is wrong."""
    try:
        path = resolve_run(path)
    except ValueError as err:  # not a zoo model's name
        raise CheckpointError(str(err)) from None
    if not path.exists():
        raise CheckpointError(f"{path} does not exist")
    if not (path / META_FILE).exists():
        latest = latest_checkpoint(path)
        if latest is None:
            raise CheckpointError(
                f"{path} is neither a checkpoint folder (no {META_FILE}) nor a run directory "
                "with checkpoints/step_* folders"
            )
        path = latest
    meta_path = path / META_FILE
    try:
        meta = json.loads(meta_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{meta_path} is not valid JSON (truncated?): {err}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(
            f"{meta_path} is not an interp-rand checkpoint (format tag "
            f"{meta.get('format') if isinstance(meta, dict) else None!r}, expected {FORMAT!r})"
        )
    if meta.get("version") != VERSION:
        raise CheckpointError(f"{meta_path} has version {meta.get('version')!r}; this build reads {VERSION}")
    return path, meta


WEIGHTS_CONFIG_KEY = "model_config"


def weights_metadata(model_config: ModelConfig) -> dict[str, str]:
    """The safetensors metadata every weights file is written with: the model config the weights
    belong to, so a ``checkpoint.json`` edited to another config of the same shapes (softmax
    weights read as linear attention) is refused instead of scored."""
    return {WEIGHTS_CONFIG_KEY: json.dumps(model_config.to_dict(), sort_keys=True)}


def _check_weights_config(file: Path, model_config: ModelConfig) -> None:
    from safetensors import safe_open

    try:
        with safe_open(str(file), "pt") as handle:
            written = (handle.metadata() or {}).get(WEIGHTS_CONFIG_KEY)
    except (SafetensorError, OSError, ValueError):
        return  # unreadable: _load_tensors says so
    if written is None:  # weights written before the config was recorded with them
        return
    try:
        theirs = json.loads(written)
    except ValueError:
        raise CheckpointError(f"{file}: its recorded model config is not JSON") from None
    ours = model_config.to_dict()
    # a field added to ModelConfig after these weights were written is absent from their record:
    # it holds its default there (what loading their checkpoint.json gives it)
    defaults = {f.name: f.default for f in dataclasses.fields(ModelConfig)}
    theirs = {**{k: defaults[k] for k in set(ours) - set(theirs) if k in defaults}, **theirs}
    differ = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
    if differ:
        detail = "; ".join(f"{k}: checkpoint.json {ours.get(k)!r}, the weights' {theirs.get(k)!r}" for k in differ)
        raise CheckpointError(f"{file} was written for another model config than its checkpoint.json states "
                              f"({detail}); the checkpoint.json was edited or belongs to other weights")


FORWARD_CHECK_KEY = "forward_check"
FORWARD_CHECK_EXAMPLES = 64
FORWARD_CHECK_SEED = 1_000_003  # its own seed: the check batch is none of the training's batches
# the share of the stored answers the loaded model must give again: float reductions may move a
# near-tie between machines or versions, an architecture read wrongly moves most of them
FORWARD_CHECK_AGREEMENT = 0.9
# the architecture fields whose every value fits the same weights (the shapes cannot tell them
# apart): tried, when a check fails, to name the field suspected
SHAPE_BLIND_FIELDS = ("attention", "mask", "positional", "act_fn", "input_mlp_act", "use_attn_scale", "seed_mode")


def _check_batch(spec: RunSpec, n: int, seed: int):
    from interp_rand.training.objectives import fixed_seeds_if_asked

    task = spec.make_task()
    batch = task.sample(n, torch.Generator().manual_seed(seed))
    return task, fixed_seeds_if_asked(task, batch, spec.train_config)


def _digest(*tensors) -> str:
    import hashlib

    h = hashlib.sha256()
    for t in tensors:
        if t is not None:
            t = t.detach().contiguous().cpu()
            h.update(str((t.dtype, tuple(t.shape))).encode())
            h.update(t.numpy().tobytes())
    return h.hexdigest()[:16]


@torch.no_grad()
def _answers(model, task, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """``[n, n_answer]`` the model's answer ids on ``batch``, and ``[n]`` exact match."""
    from interp_rand.losses import answer_correct, answer_logits, get_loss_kind

    logits = model(batch.inputs, **batch.model_kwargs())
    answers = get_loss_kind(task.loss_kind).predict(answer_logits(logits, batch))
    return answers.long(), answer_correct(logits, batch, task.loss_kind).all(-1)


def forward_check(spec: RunSpec, model: torch.nn.Module, n: int = FORWARD_CHECK_EXAMPLES,
                  seed: int = FORWARD_CHECK_SEED) -> dict[str, Any]:
    """What ``model`` answers on ``n`` examples of ``spec``'s task drawn from ``seed`` (the run's
    fixed seed where it was trained on one): the batch's digest, every answer id (as a string of
    integers), and the exact match; a few milliseconds for the zoo's sizes."""
    task, batch = _check_batch(spec, n, seed)
    answers, exact = _answers(model.eval(), task, batch)
    return {"n": n, "seed": seed, "inputs": _digest(batch.inputs, batch.seeds, batch.attention_mask),
            "answers": " ".join(map(str, answers.reshape(-1).tolist())), "exact_match": float(exact.float().mean())}


def forward_check_entry(spec: RunSpec, model_state: dict[str, torch.Tensor]) -> dict[str, Any]:
    """``{"forward_check": ...}`` for a training run's weights, ``{}`` for another trainer's spec
    (the grid world's agents) or weights that do not build (the load refuses those itself)."""
    if not isinstance(spec, RunSpec):
        return {}
    try:
        model = HookedTransformer(spec.model_config)
        model.load_state_dict(model_state)
        return {FORWARD_CHECK_KEY: forward_check(spec, model)}
    except (RuntimeError, ValueError, KeyError, TypeError):
        return {}


def _valid_check(check: Any) -> bool:
    return (isinstance(check, dict) and isinstance(check.get("n"), int) and 0 < check["n"] <= 4096
            and isinstance(check.get("seed"), int) and isinstance(check.get("inputs"), str)
            and isinstance(check.get("answers"), str) and isinstance(check.get("exact_match"), (int, float)))


def _agreement(model, task, batch, stored: torch.Tensor) -> tuple[float, float]:
    answers, exact = _answers(model, task, batch)
    answers = answers.reshape(-1)
    if answers.shape != stored.shape:
        return 0.0, float(exact.float().mean())
    return float((answers == stored).float().mean()), float(exact.float().mean())


def verify_forward_check(meta_path: Path, spec: RunSpec, model: torch.nn.Module, check: dict[str, Any]) -> None:
    """Run ``model`` on the stored check batch and refuse it (:class:`CheckpointError`, one line
    naming ``meta_path``, the field suspected and the two exact matches) when it gives fewer than
    :data:`FORWARD_CHECK_AGREEMENT` of the stored answers. A batch that no longer draws the same
    (the task's sampling changed since) cannot be compared: nothing is said."""
    task, batch = _check_batch(spec, check["n"], check["seed"])
    if _digest(batch.inputs, batch.seeds, batch.attention_mask) != check["inputs"]:
        return
    try:
        stored = torch.tensor([int(v) for v in check["answers"].split()], dtype=torch.long)
    except ValueError:
        raise CheckpointError(f"{meta_path}: its {FORWARD_CHECK_KEY!r} answers are not integers") from None
    agree, exact = _agreement(model.eval(), task, batch, stored)
    if agree >= FORWARD_CHECK_AGREEMENT:
        return
    suspect = _suspect_field(spec, model, task, batch, stored)
    raise CheckpointError(
        f"{meta_path} does not describe its weights: on its stored check batch ({check['n']} examples) the model "
        f"scores exact match {exact:.3f} where {float(check['exact_match']):.3f} was stored ({agree:.0%} of the "
        f"stored answers given again); {suspect}")


def _suspect_field(spec: RunSpec, model, task, batch, stored: torch.Tensor) -> str:
    """Which shape-blind architecture field, set to another value, gives the stored answers again."""
    from interp_rand.model.config import ACT_FNS, MASK_KINDS, MIXERS, POSITIONAL_KINDS, SEED_MODES

    choices = {"attention": tuple(MIXERS.names()), "mask": MASK_KINDS, "positional": POSITIONAL_KINDS,
               "act_fn": ACT_FNS, "input_mlp_act": ACT_FNS, "use_attn_scale": (True, False), "seed_mode": SEED_MODES}
    state = model.state_dict()
    cfg = spec.model_config
    for field_name in SHAPE_BLIND_FIELDS:
        for value in choices[field_name]:
            if value == getattr(cfg, field_name):
                continue
            try:
                other = HookedTransformer(dataclasses.replace(cfg, **{field_name: value}))
                other.load_state_dict(state)
                agree, _ = _agreement(other.eval(), task, batch, stored)
            except Exception:  # noqa: BLE001 - a value this config or these weights cannot take
                continue
            if agree >= FORWARD_CHECK_AGREEMENT:
                return (f"the field suspected: model.{field_name} (checkpoint.json says {getattr(cfg, field_name)!r}; "
                        f"{value!r} gives the stored answers): restore it")
    return ("no single architecture field the shapes cannot tell apart (" + ", ".join(SHAPE_BLIND_FIELDS)
            + ") explains it: the task config or the weights were changed since it was written")


def load_model(folder: Path, model_config: ModelConfig) -> HookedTransformer:
    """A model of ``model_config`` with the weights of ``folder/model.safetensors``, in eval
    mode; :class:`CheckpointError` when the file is missing, unreadable, does not fit, was
    written for another model config (:func:`weights_metadata`) or holds a NaN or infinite
    weight (training refuses to write one, so it is damage: every report of such a model would
    be wrong)."""
    model = HookedTransformer(model_config)
    _check_weights_config(Path(folder) / MODEL_FILE, model_config)
    state = _load_tensors(Path(folder) / MODEL_FILE)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong = sorted(k for k in set(state) & set(expected) if state[k].shape != expected[k].shape)
    if missing or unexpected or wrong:
        raise CheckpointError(
            f"{Path(folder) / MODEL_FILE} does not fit its own model config: missing {missing}, "
            f"unexpected {unexpected}, wrong shapes {wrong}"
        )
    for name, tensor in state.items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            bad = int((~torch.isfinite(tensor)).sum())
            raise CheckpointError(f"{Path(folder) / MODEL_FILE}: tensor {name} holds {bad} NaN or infinite "
                                  f"value{'s' if bad > 1 else ''} of {tensor.numel()}; the weights are damaged")
    model.load_state_dict(state)
    return model.eval()


def _load_tensors(file: Path) -> dict[str, torch.Tensor]:
    try:
        return load_file(file)
    except FileNotFoundError:
        raise CheckpointError(f"{file} is missing") from None
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(f"{file} is not a readable safetensors file (truncated?): {err}") from None


def _contiguous(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    # safetensors refuses views and shared storage; checkpoints own their bytes.
    return {k: v.detach().contiguous().clone() for k, v in state.items()}
