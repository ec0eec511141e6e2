"""The replayable analyses of any trained run: accuracy by metadata group, the circuit (edge
scores and faithfulness) and probe selectivity. Each is ``analysis(view, **options) ->
Measures`` (:mod:`.view`), registered in :data:`DYNAMICS_ANALYSES` on import with the
thresholds whose crossing steps a replay reports.

- ``accuracy``: ``accuracy/exact_match`` and ``accuracy/<metadata>=<value>`` for every
  metadata group the evaluation breaks down (:func:`interp_rand.evaluation.evaluate`'s
  ``breakdown``), ``position/<i>`` per answer position and ``loss/held_out``. Threshold: 0.99.
- ``circuit``: edge scores of the default discovery method (EAP, resample ablation, log-prob
  metric) on the view's clean/corrupted pairs. The edges tracked are the same at every step:
  the ``top_edges`` largest ``|score|`` of the run's *final* checkpoint (measured once, kept in
  ``view.cache``), as ``edge/<edge>`` (the score) and ``edge_rel/<edge>`` (the score over its
  final value: 1 at the end; threshold 0.5, "half its final strength"). ``faithfulness/own``:
  the recovered share of this checkpoint's own circuit: its top edges by the ``connected``
  selection, as many as ``size`` or by default as the final checkpoint's smallest faithful
  circuit (:func:`circuits.smallest_faithful_circuit`) takes, or with ``smallest`` its own
  smallest faithful circuit; its size (after dangling edges are dropped) in ``circuit_size/own``;
  ``faithfulness/final_circuit``: the recovered share, at this checkpoint, of the final
  checkpoint's circuit (threshold 0.8 for both, judged only where ``gap/metric`` is at least
  :data:`MEANINGFUL_GAP` of the final checkpoint's: a share of a near-zero gap is noise). ``gap/metric``: the clean − corrupted metric
  gap every share divides by; below :data:`circuits.analyses.faithfulness.TINY_GAP` the shares
  are noise and reported as NaN.
- ``probe``: linear-probe selectivity (accuracy − control-task accuracy on held-out input
  groups, :func:`probes.suite.probe_task`) of every registered variable of the task at each
  residual hook, as ``probe/<variable>@<hook>`` (the mean over the variable's instances of the
  best position's selectivity; threshold 0.5), and the same for a random-initialised model
  of the architecture, measured once (``probe_random_init/...``: the control line).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from interp_rand.registry import Option
from interp_rand.reports.dynamics.view import DYNAMICS_ANALYSES, THRESHOLDS, CheckpointView, Measures, Threshold, \
    open_view


@DYNAMICS_ANALYSES.add("accuracy", description="exact match overall, by each metadata group of the task's "
                       "evaluation breakdown and by answer position; the held-out loss")
def accuracy(view: CheckpointView) -> Measures:
    from interp_rand.evaluation import evaluate

    result = evaluate(view.model, view.task, view.batch)
    out: Measures = {"accuracy/exact_match": result.exact_match}
    for key, groups in result.breakdown.items():
        for value, entry in groups.items():
            out[f"accuracy/{key}={value}"] = entry["exact_match"]
    for i, share in enumerate(result.per_position):
        out[f"position/{i}"] = share
    out["loss/held_out"] = result.loss
    return out


THRESHOLDS.register("accuracy", (Threshold("accuracy/", 0.99),))


def final_checkpoint(view: CheckpointView) -> Path:
    """The newest checkpoint of the run ``view``'s checkpoint belongs to (itself for a single
    checkpoint folder)."""
    from interp_rand.run_names import run_of
    from interp_rand.training.checkpoint import latest_checkpoint

    path = Path(view.checkpoint.path)
    run = run_of(path)
    return (latest_checkpoint(run) if run is not None else None) or path


_CIRCUIT_OPTIONS = (
    Option("method", "str", "eap", "discovery method (circuits' registry: eap, eap-ig, exact, acdc); eap costs "
           "one forward and backward, eap-ig about `steps` of them"),
    Option("metric", "str", "logprob", "the metric edges are scored and circuits measured by"),
    Option("top_edges", "int", 20, "edges tracked at every step: the final checkpoint's largest |score|",
           minimum=1),
    Option("size", "int", 0, "top edges of each checkpoint's own circuit (connected selection: those on no "
           "input-to-logits path are dropped); 0: as many as the final checkpoint's smallest faithful circuit "
           "takes (chosen once)", minimum=0),
    Option("smallest", "bool", False, "each checkpoint's own smallest faithful circuit instead (a faithfulness "
           "curve per checkpoint: about 3x slower)"),
)


def _circuit_at(view: CheckpointView, method: str, metric: str, size: int, smallest: bool) -> dict[str, Any]:
    """Edge scores, the share meter and the own circuit (``size`` top edges, connected selection;
    ``size=0`` or ``smallest``: the smallest faithful circuit) of one checkpoint."""
    from circuits import Ablation, discover
    from circuits.analyses.faithfulness import TINY_GAP, ShareMeter, smallest_faithful_circuit
    from circuits.graph.selection import select
    from circuits.interventions.metrics import get_metric

    ablation = Ablation("resample", seed=view.seed)
    pairs = view.pairs
    scores = discover(view.model, pairs.clean, pairs.corrupted, metric=metric, method=method, ablation=ablation)
    graph = scores.graph
    meter = None
    try:
        meter = ShareMeter.of_pairs(view.model, graph, pairs.clean, pairs.corrupted, ablation, get_metric(metric))
    except ValueError:  # no gap at all (an untrained model can give one): the shares are undefined
        pass
    gap = 0.0 if meter is None else meter.full - meter.empty
    meter = meter if abs(gap) >= TINY_GAP else None
    if (smallest or size == 0) and meter is not None:
        own = smallest_faithful_circuit(view.model, scores, pairs.clean, pairs.corrupted, metric=metric,
                                        ablation=ablation)[0]
    else:
        own = select(scores, min(size or graph.n_edges, graph.n_edges), "connected")
    values = dict(zip((e.name for e in graph.edges()), scores.values().tolist()))
    return {"scores": scores, "values": values, "meter": meter, "gap": gap, "own": own}


@DYNAMICS_ANALYSES.add("circuit", description="edge scores (EAP by default) of the final checkpoint's top edges, "
                       "the faithfulness of each checkpoint's own circuit and of the final one",
                       options=_CIRCUIT_OPTIONS)
def circuit(view: CheckpointView, method: str = "eap", metric: str = "logprob", top_edges: int = 20,
            size: int = 0, smallest: bool = False) -> Measures:
    settings = (method, metric, top_edges, size, smallest)
    store = view.cache.setdefault("circuit", {})
    if store.get("settings") != settings:  # the final checkpoint: measured once per replay
        final = final_checkpoint(view)
        at_final = _circuit_at(open_view(final, n=len(view.batch), seed=view.seed), method, metric, size, smallest)
        ranked = sorted(at_final["values"].items(), key=lambda item: -abs(item[1]))
        store.clear()
        # size 0: every checkpoint's own circuit takes as many top edges as the final's smallest faithful one
        k = size or int(at_final["own"].settings.get("top_k") or len(at_final["own"]))
        store.update(settings=settings, final_path=final, final=at_final, k=k,
                     tracked=[name for name, value in ranked[:top_edges] if value != 0])
    final = store["final"]
    here = final if Path(view.checkpoint.path) == Path(store["final_path"]) else \
        _circuit_at(view, method, metric, store["k"], smallest)
    out: Measures = {}
    for name in store["tracked"]:
        value = here["values"][name]
        out[f"edge/{name}"] = value
        out[f"edge_rel/{name}"] = value / final["values"][name]
    meter = here["meter"]
    out["gap/metric"] = here["gap"]
    out["circuit_size/own"] = float(len(here["own"]))
    if meter is None:
        out["faithfulness/own"] = out["faithfulness/final_circuit"] = math.nan
    else:
        graph = here["scores"].graph
        out["faithfulness/own"] = meter.share(graph.keep_mask(list(here["own"].edges)))
        out["faithfulness/final_circuit"] = meter.share(graph.keep_mask(list(final["own"].edges)))
    return out


#: A faithfulness share divides by the checkpoint's own metric gap: its crossing is reported only
#: where that gap is at least this share of the final checkpoint's (a ratio of two near-zero
#: numbers, early in training, says nothing).
MEANINGFUL_GAP = 0.1
THRESHOLDS.register("circuit", (Threshold("edge_rel/", 0.5),
                                Threshold("faithfulness/", 0.8, given=("gap/metric", MEANINGFUL_GAP))))


_PROBE_OPTIONS = (
    Option("control", "bool", True, "also probe a random-initialised model once (the probe_random_init/ lines)"),
    Option("alpha", "float", 1e-3, "ridge strength relative to the mean feature variance", minimum=0),
)


def _selectivities(results: list[Any], group: str) -> Measures:
    out: Measures = {}
    for result in results:
        best = result.selectivity.amax(dim=1)  # [hook, instance]: the best position of each instance
        for h, hook in enumerate(result.hooks):
            out[f"{group}/{result.variable}@{hook}"] = float(best[h].mean())
    return out


@DYNAMICS_ANALYSES.add("probe", description="linear-probe selectivity (accuracy - control-task accuracy) of each "
                       "task variable at each residual hook, and of a random-initialised model",
                       options=_PROBE_OPTIONS)
def probe(view: CheckpointView, control: bool = True, alpha: float = 1e-3) -> Measures:
    import probes  # noqa: F401  (registers the task variables)
    from probes.controls import random_init_like
    from probes.suite import ProbeConfig, probe_task

    config = ProbeConfig(alpha=alpha, seed=view.seed, random_init=False, causal=False)
    out = _selectivities(probe_task(view.model, view.task, view.batch, config), "probe")
    if control:
        store = view.cache.setdefault("probe", {})
        if store.get("alpha") != alpha:
            results = probe_task(random_init_like(view.model), view.task, view.batch, config)
            store.update(alpha=alpha, control=_selectivities(results, "probe_random_init"))
        out.update(store["control"])
    return out


THRESHOLDS.register("probe", (Threshold("probe/", 0.5),))

__all__ = ["accuracy", "circuit", "final_checkpoint", "probe"]
