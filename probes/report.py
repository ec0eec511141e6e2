"""What the attention-pattern report shows, computed (drawing lives in :mod:`probes.report_html`):
mean and metadata-conditioned patterns per head, head-role scores, example patterns chosen by
metadata, the probe table with controls and causal checks, for seeded models the seed
channel's share of attribution, and, when asked for heads (``qk_heads``), their query/key
attribution with its patching check (:mod:`probes.qk_attribution`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from interp_rand.tasks.base import KEY_VALUE_RECALL, Batch, has_capability
from interp_rand.validation import MAX_SEED, bounded, check_bounds
from probes.activations import seed_offset
from probes.attention import attention_patterns, conditional_patterns, conditions, task_slice
from probes.attribution import seed_attribution
from probes.head_roles import RoleScores, score_roles
from probes.suite import ProbeConfig, probe_task
from probes.variables import task_variables


@dataclass(frozen=True)
class ReportConfig:
    """How much the report computes.

    Attributes:
        n_examples: examples for the attention averages and role scores.
        n_probe_examples: examples for the probes (split by input group).
        n_attribution_examples: examples for the seed attribution (seeded models only).
        n_example_patterns: example patterns shown per metadata condition.
        probes: include the probe table.
        seed: seeds the data and every random draw of the report.
    """

    n_examples: int = bounded(2000, minimum=1, counts="examples")
    n_probe_examples: int = bounded(2000, minimum=1, counts="examples")
    n_attribution_examples: int = bounded(64, minimum=1, counts="examples")
    n_example_patterns: int = bounded(1, minimum=1)
    probes: bool = True
    seed: int = bounded(0, minimum=0, maximum=MAX_SEED)

    def __post_init__(self) -> None:
        check_bounds(self)


@dataclass(frozen=True)
class ExamplePattern:
    """One example's patterns ``[layer, head, q, k]`` with its token labels."""

    title: str
    labels: tuple[str, ...]
    pattern: Tensor


@dataclass(frozen=True)
class ReportData:
    title: str
    info: dict[str, Any]
    position_labels: tuple[str, ...]
    position_names: tuple[str, ...]
    mean_patterns: dict[str, Tensor]
    roles: RoleScores
    examples: tuple[ExamplePattern, ...]
    probe_rows: tuple[dict, ...]
    probe_layers: dict[str, dict[str, Any]]
    seed_share: dict[str, float] | None
    seconds: dict[str, float] = field(default_factory=dict)
    # (attribution, patching check) per head asked for with ``qk_heads`` (optional section)
    qk: tuple[tuple[Any, Any], ...] = ()
    # per qk head on a key/value recall task: which keys it reads under which seed bits
    qk_seed_reads: tuple[Any, ...] = ()
    # per role: the score of a head that attends uniformly over the keys it may see (the chance
    # baseline a role score is read against); None where no such baseline exists (seed_reader as
    # a total variation between patterns)
    role_chance: dict[str, float | None] = field(default_factory=dict)


def position_labels(task, n_pos: int) -> list[str]:
    """``"index name"`` per input position, from the task's :meth:`position_names` (``0 a2``,
    ``3 +``); positions beyond the names (a longer context) are ``p{i}``."""
    names = list(task.position_names())[:n_pos]
    names += [f"p{i}" for i in range(len(names), n_pos)]
    return [f"{i} {name}" for i, name in enumerate(names)]


def token_labels(task, batch: Batch, row: int) -> list[str]:
    """Per-position labels of one example: index, position name and the token it holds."""
    return [f"{i} {label}" for i, label in enumerate(task.token_labels(batch, row))]


def _examples(model, task, batch, patterns, config) -> list[ExamplePattern]:
    chosen = [("first example", torch.ones(len(batch), dtype=torch.bool))]
    chosen += [(name, fn(task, batch)) for name, fn in conditions(task)]
    out = []
    offset = seed_offset(model)
    for name, where in chosen:
        for row in where.nonzero()[:, 0][: config.n_example_patterns].tolist():
            labels = token_labels(task, batch, row)
            if offset:
                labels = ["seed"] + labels
            out.append(ExamplePattern(f"{name} (example {row})", tuple(labels), patterns[row]))
    return out


def chance_scores(model: nn.Module, task, batch: Batch, roles: RoleScores) -> dict[str, float | None]:
    """Per role of ``roles``: the score of uniform causal attention (every query spreads its mass
    evenly over the keys at or before it), i.e. what a head that ignores the input gets. None for
    ``seed_reader`` when the seed enters every token (its score is a total variation between two
    patterns, which uniform attention does not have)."""
    n = seed_offset(model) + batch.inputs.shape[1]
    uniform = torch.tril(torch.ones(n, n))
    uniform = (uniform / uniform.sum(-1, keepdim=True)).expand(len(batch), 1, 1, n, n)
    names = [r for r in roles.scores if r != "seed_reader" or seed_offset(model)]
    chance = score_roles(model, task, batch, roles=names, patterns=uniform).scores if names else {}
    return {r: (float(chance[r][0, 0]) if r in chance else None) for r in roles.scores}


def _probe_layers(results) -> dict[str, dict[str, Any]]:
    """Per variable: selectivity per hook at each instance's output position (trained and
    random-init), the figure of "at which layer is it decodable"."""
    out = {}
    for r in results:
        rows = r.rows()
        per_instance = {}
        for k, row in enumerate(rows):
            h, p = r.at(row["hook"], row["position"])
            per_instance[r.instance_names[k]] = {
                "position": row["position"],
                "trained": r.selectivity[:, p, k].tolist(),
                "random": None if r.random_accuracy is None else r.random_selectivity[:, p, k].tolist(),
            }
        out[r.variable] = {"hooks": list(r.hooks), "instances": per_instance}
    return out


def check_qk_heads(model: nn.Module, task, qk_heads: tuple[tuple[int, int, int], ...]) -> None:
    """Refuse a ``(layer, head, query)`` outside the model or the task's positions before any work."""
    n_layers, n_heads = int(model.cfg.n_layers), int(model.cfg.n_heads)
    n_stream = seed_offset(model) + len(task.position_names())
    for layer, head, query in qk_heads:
        if not (0 <= layer < n_layers and 0 <= head < n_heads and 0 <= query < n_stream):
            raise ValueError(f"query/key head {layer}.{head}@{query} is outside the model: layers 0..{n_layers - 1}, "
                             f"heads 0..{n_heads - 1}, query positions 0..{n_stream - 1}")


def build_report(model: nn.Module, task, config: ReportConfig = ReportConfig(), *,
                 batch_fn=None, info: dict[str, Any] | None = None, progress: bool = False,
                 qk_heads: tuple[tuple[int, int, int], ...] = (), qk_examples: int = 256) -> ReportData:
    """Compute everything the report shows. ``batch_fn(batch) -> batch`` adjusts sampled
    batches (e.g. pins a fixed-seed model's seed to ``r0``); ``progress``: name the stages on
    stderr (:mod:`interp_rand.progress`); ``qk_heads``: ``(layer, head, query position)`` (a
    residual-stream position: a seed token, if any, is 0) whose query/key attribution and
    patching check the report adds, on the first ``qk_examples`` examples."""
    from interp_rand.progress import note
    from interp_rand.tasks.spec import require_task

    require_task(task, "build_report")
    check_qk_heads(model, task, qk_heads)
    seconds: dict[str, float] = {}
    adjust = batch_fn or (lambda b: b)
    generator = torch.Generator().manual_seed(config.seed)
    began = time.perf_counter()
    batch = adjust(task.sample(config.n_examples, generator))
    note(f"attention patterns and head roles ({len(batch)} examples)", progress)
    patterns = attention_patterns(model, batch)
    roles = score_roles(model, task, batch, patterns=patterns, generator=generator)
    chance = chance_scores(model, task, batch, roles)
    means = conditional_patterns(task, batch, task_slice(model, patterns))
    examples = _examples(model, task, batch, patterns, config)
    seconds["attention"] = time.perf_counter() - began

    rows, layers = [], {}
    if config.probes and task_variables(task):
        began = time.perf_counter()
        probe_batch = adjust(task.sample(config.n_probe_examples, generator))
        note(f"probes with controls and causal checks ({len(probe_batch)} examples)", progress)
        results = probe_task(model, task, probe_batch, ProbeConfig(seed=config.seed, causal_examples=256),
                             progress=progress)
        rows = [row for r in results for row in r.rows()]
        layers = _probe_layers(results)
        seconds["probes"] = time.perf_counter() - began

    share = None
    if "hook_seed" in model.hook_dict:
        began = time.perf_counter()
        note("the seed channel's attribution share (integrated gradients)", progress)
        attr = seed_attribution(model, task, batch[: config.n_attribution_examples])
        share = {"mean": attr.mean_share}
        share.update({name: float(v) for name, v in zip(attr.outputs, attr.mean_share_per_output)})
        seconds["attribution"] = time.perf_counter() - began

    qk: tuple = ()
    seed_reads: tuple = ()
    if qk_heads:
        from probes.qk_attribution import explain_heads

        began = time.perf_counter()
        note(f"query/key attribution of {len(qk_heads)} head(s)", progress)
        part = batch[:qk_examples]
        qk = explain_heads(model, part, qk_heads, seed=config.seed)
        if has_capability(task, KEY_VALUE_RECALL):
            from probes.qk_attribution import reads_by_seed_bit

            seed_reads = tuple(reads_by_seed_bit(attr, part, task, seed=config.seed) for attr, _ in qk)
        seconds["qk attribution"] = time.perf_counter() - began

    from interp_rand.run_names import run_label

    info = dict(info or {})
    info.setdefault("task", task.name)
    return ReportData(
        title=f"attention report: {run_label(info['run']) if 'run' in info else task.name}",
        info=info,
        position_labels=tuple(position_labels(task, batch.inputs.shape[1])),
        position_names=tuple(label.split(" ", 1)[1] for label in position_labels(task, batch.inputs.shape[1])),
        mean_patterns=means,
        roles=roles,
        examples=tuple(examples),
        probe_rows=tuple(rows),
        probe_layers=layers,
        seed_share=share,
        seconds=seconds,
        qk=qk,
        qk_seed_reads=seed_reads,
        role_chance=chance,
    )


def report_from_run(run_dir: str | Path, config: ReportConfig = ReportConfig(), progress: bool = False,
                    qk_heads: tuple[tuple[int, int, int], ...] = ()) -> ReportData:
    """Load the newest checkpoint of ``run_dir`` (or a checkpoint folder) and build its report;
    a model trained on the fixed seed ``r0`` is analysed on ``r0``; ``qk_heads`` as in
    :func:`build_report`."""
    from interp_rand.training.checkpoint import load_checkpoint
    from interp_rand.training.objectives import fixed_seeds_if_asked

    ckpt = load_checkpoint(run_dir)
    task = ckpt.spec.make_task()
    info = {"run": str(run_dir), "checkpoint": str(ckpt.path), "step": ckpt.step, "task": task.name,
            "task config": task.config_dict(), "exact match (training eval)": ckpt.metrics.get("exact_match")}
    return build_report(ckpt.model(), task, config,
                        batch_fn=lambda b: fixed_seeds_if_asked(task, b, ckpt.spec.train_config), info=info,
                        progress=progress, qk_heads=qk_heads)


__all__ = ["ExamplePattern", "ReportConfig", "ReportData", "build_report", "chance_scores", "position_labels",
           "report_from_run", "token_labels"]
