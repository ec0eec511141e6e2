"""The circuit report of a trained run in one call (what ``interp-rand circuit`` prints and
writes): discover a circuit, measure its faithfulness and draw it.

    >>> report = circuit_report("zoo:sort", method="eap", n=256, seed=0)
    >>> report.summary["recovered"], len(report.circuit)
    >>> report.write("out/sort-circuit")   # circuit.json/.graphml/.dot, faithfulness.json, circuit.html
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_rand import progress as _progress
from interp_rand.reports.inputs import load_run_inputs

# The seed of the data when none is given (the CLI's default).
DEFAULT_SEED = 20_261_130


def position_names(model: Any, task: Any) -> list[str]:
    """Names of the model's positions: the task's, after a seed token if the model has one."""
    return ["seed"] * int(model.cfg.seed_offset) + list(task.position_names())


def check_top_k(top_k: int | str | None, model: Any, pairs: Any, by_position: bool) -> None:
    """Refuse a ``top_k`` larger than the model's number of edges, before edges are scored
    (the graph is built from the architecture alone, which costs nothing)."""
    from circuits.graph.model_graph import ModelGraph

    if not isinstance(top_k, int):
        return
    n_edges = ModelGraph.of(model, pairs.clean.inputs.shape[1], by_position).n_edges
    if top_k > n_edges:
        per = "per position" if by_position else "over all positions"
        raise ValueError(f"--top-k={top_k}: this model has {n_edges} edges ({per}); give 1..{n_edges} or auto")


def top_k_circuit(scores: Any, top_k: int | str | None, model: Any, pairs: Any, ablation: Any, *,
                  metric: str = "logprob", target: float = 0.8, progress: bool = False) -> Any:
    """The top ``top_k`` edges, or with ``"auto"`` (or ``None``) the smallest faithful circuit."""
    from circuits import smallest_faithful_circuit

    if top_k in (None, "auto"):
        _progress.note("choosing the smallest faithful circuit", progress)
        return smallest_faithful_circuit(model, scores, pairs.clean, pairs.corrupted, metric=metric,
                                         ablation=ablation, target=target, progress=progress)[0]
    return scores.circuit(top_k=top_k)


def check_circuit_options(method: str, top_k: int | str | None, threshold: float | None,
                          circuit: str | Path | None) -> None:
    """Refuse contradictory size options before any work."""
    if top_k is not None and threshold is not None and method != "acdc":
        raise ValueError("give --top-k or --threshold, not both")
    if threshold is not None and threshold < 0:
        raise ValueError(f"--threshold={threshold} must be >= 0")
    if circuit is not None and (top_k is not None or threshold is not None):
        raise ValueError("--circuit measures the given circuit: --top-k and --threshold do not apply")


@dataclass
class CircuitReport:
    """Attributes:
    circuit: the discovered (or given) :class:`~circuits.Circuit`, its settings naming the run.
    faithfulness: its :class:`~circuits.Faithfulness`.
    summary: what faithfulness.json holds (method, discovery seconds, the faithfulness figures).
    title: the drawing's title; attention: mean attention per layer for the drawing (None
    over all positions); position_names: the model's position names.
    """

    circuit: Any
    faithfulness: Any
    summary: dict[str, Any]
    title: str
    attention: Any
    position_names: list[str]

    def to_json(self) -> str:
        return json.dumps(self.summary, indent=2)

    def key_numbers(self) -> dict[str, Any]:
        """The summary without the curve and the bootstrap spread (what the CLI prints)."""
        return {k: v for k, v in self.summary.items() if k not in ("curve", "spread")}

    def write(self, out: str | Path) -> Path:
        """circuit.json, circuit.graphml, circuit.dot, faithfulness.json and circuit.html in ``out``."""
        from circuits.draw.circuit_figure import write_circuit_html

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        self.circuit.save(out / "circuit.json")
        self.circuit.write_graphml(out / "circuit.graphml")
        self.circuit.write_dot(out / "circuit.dot")
        (out / "faithfulness.json").write_text(self.to_json())
        write_circuit_html(self.circuit, out / "circuit.html", self.title, attention=self.attention,
                           position_names=self.position_names)
        return out


def circuit_report(run: str | Path, *, method: str = "eap", metric: str = "logprob", ablation: str = "resample",
                   n: int = 256, pairs: str = "task", seed: int = DEFAULT_SEED, top_k: int | str | None = None,
                   target: float = 0.8, threshold: float | None = None, options: dict[str, Any] | None = None,
                   by_position: bool = True,
                   n_resamples: int = 5, circuit: str | Path | None = None, progress: bool = False) -> CircuitReport:
    """Score every edge of ``run``'s model on ``n`` clean/corrupted ``pairs`` of its task, keep a
    circuit (``top_k`` edges, those above ``threshold``, ACDC's own, or by default the smallest
    faithful one reaching ``target``), or measure the saved ``circuit`` instead, and measure its
    faithfulness (``n_resamples`` bootstrap resamples). ``options``: the method's options (its
    registry entry lists them; e.g. ``{"steps": 5}`` for eap-ig); ACDC's search threshold is
    ``threshold`` (default 0.01)."""
    from circuits import Ablation, Circuit, discover, faithfulness
    from circuits.analyses.flow import mean_attention
    from interp_rand.zoo.location import run_label

    check_circuit_options(method, top_k, threshold, circuit)
    inputs = load_run_inputs(run, n, seed, pairs)
    ckpt, model, task, data = inputs.ckpt, inputs.model, inputs.task, inputs.pairs
    abl = Ablation(ablation, seed=seed)
    options = dict(options or {})
    if method == "acdc":
        options["threshold"] = 0.01 if threshold is None else threshold
    start = time.perf_counter()
    if circuit is not None:
        found, scores = Circuit.load(circuit, model), None
        by_position = bool(found.settings.get("by_position", True))
        if found.settings.get("n_positions") not in (None, data.clean.inputs.shape[1] + model.cfg.seed_offset):
            raise ValueError(f"{circuit} was found on {found.settings['n_positions']} positions; "
                             f"this task has {data.clean.inputs.shape[1] + model.cfg.seed_offset}")
    else:
        check_top_k(top_k, model, data, by_position=by_position)
        scores = discover(model, data.clean, data.corrupted, metric=metric, method=method,
                          ablation=abl, by_position=by_position, progress=progress, **options)
        if method == "acdc" and top_k is None:
            found = scores.circuit(threshold=options["threshold"])
        elif threshold is not None:
            found = scores.circuit(threshold=threshold)
        else:
            found = top_k_circuit(scores, top_k, model, data, abl, metric=metric, target=target, progress=progress)
    seconds = time.perf_counter() - start
    found = dataclasses.replace(found, settings={**found.settings, "by_position": by_position,
                                "run": str(ckpt.path), "task": ckpt.spec.task_name, "data_seed": seed})
    _progress.note(f"measuring the faithfulness of {len(found)} edges", progress)
    result = faithfulness(model, found, data.clean, data.corrupted, metric=metric, ablation=abl, scores=scores,
                          n_resamples=n_resamples, seed=seed, progress=progress)
    name = str(circuit) if circuit else method
    summary = {"method": name, "discovery_seconds": round(seconds, 3), **result.to_dict()}
    return CircuitReport(
        circuit=found, faithfulness=result, summary=summary,
        title=f"{run_label(run)}: {name}, {len(found)} of {found.total_edges} edges",
        attention=mean_attention(model, data.clean) if by_position else None,
        position_names=position_names(model, task))


__all__ = ["CircuitReport", "DEFAULT_SEED", "check_circuit_options", "check_top_k", "circuit_report",
           "position_names", "top_k_circuit"]
