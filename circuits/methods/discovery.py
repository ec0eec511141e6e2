"""Circuit discovery: one signature, a registry, and :func:`discover`.

A method is ``method(model, graph, data, metric, **options) -> scores [n_slots, n_writers,
n_readers]``; register one in :data:`DISCOVERY_METHODS` with
``@register_method("name", description=..., options=(Option(...),))`` (the command line reads
its choices and option flags from there). Built in: ``exact`` (exact path patching of one edge
at a time, many per forward: the reference), ``eap``, ``eap-ig`` (option ``steps``) and ``acdc`` (option
``threshold``).

    >>> scores = discover(model, pairs.clean, pairs.corrupted, metric="logprob", method="eap")
    >>> circuit = scores.circuit(top_k=20)
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from circuits.interventions.ablation import Ablation
from circuits.methods.acdc import acdc_scores
from circuits.methods.attribution import eap_ig_scores, eap_scores
from circuits.interventions.batched_patching import batched_edge_scores
from circuits.graph.model_graph import ModelGraph
from circuits.interventions.metrics import Metric, get_metric
from circuits.graph.scores import EdgeScores
from circuits.graph.writers import stack_writers, writer_values
from interp_rand.progress import stage
from interp_rand.registry import Entry, Option, Registry


@dataclass(frozen=True)
class PatchData:
    """What a discovery method patches with.

    Attributes:
        clean: the clean batch.
        source: the batch ablated values come from (resampling ablations), else ``None``.
        replacement: ``[batch or 1, P, n_writers, d_model]`` writer values on ablated edges.
        baseline_values: the raw hook values behind ``replacement`` (EAP-IG's path start).
    """

    clean: Any
    source: Any
    replacement: Tensor
    baseline_values: dict[str, Tensor]


DiscoveryMethod = Callable[..., Tensor]


def _defaults_from_signature(entry: Entry[DiscoveryMethod]) -> Entry[DiscoveryMethod]:
    """A method's options take their defaults from its own keyword defaults (their one owner);
    an option the method does not take as a keyword with a default is refused."""
    params = inspect.signature(entry.value).parameters
    options = []
    for option in entry.options:
        param = params.get(option.name)
        if param is None or param.default is inspect.Parameter.empty:
            raise ValueError(f"discovery method {entry.name!r}: option {option.name!r} is not a keyword "
                             f"argument with a default of {getattr(entry.value, '__name__', entry.value)}")
        if option.default is not None and option.default != param.default:
            raise ValueError(f"discovery method {entry.name!r}: option {option.name!r} says default "
                             f"{option.default!r}, the method {param.default!r}")
        options.append(dataclasses.replace(option, default=param.default))
    return dataclasses.replace(entry, options=tuple(options))


DISCOVERY_METHODS: Registry[DiscoveryMethod] = Registry("discovery method", sort=True,
                                                        check=_defaults_from_signature)


def register_method(name: str, *, description: str = "",
                    options: tuple[Option, ...] = ()) -> Callable[[DiscoveryMethod], DiscoveryMethod]:
    """Decorator adding a method to :data:`DISCOVERY_METHODS`; ``options`` describe its keyword
    options (their defaults are read from its signature), which the command line offers as flags."""

    def add(fn: DiscoveryMethod) -> DiscoveryMethod:
        return DISCOVERY_METHODS.register(name, fn, description=description, options=options)

    return add


def method_names() -> list[str]:
    return DISCOVERY_METHODS.names()


@register_method("exact", description="exact path patching of every edge, one edge at a time (the reference; "
                                      "many single-edge runs per forward)")
def _exact(model: Any, graph: ModelGraph, data: PatchData, metric: Metric, progress: bool = False) -> Tensor:
    # batched_edge_scores equals exact_edge_scores (one forward per edge) up to float rounding
    if data.source is not None:  # denoising: corrupted run, one edge given its clean value
        return batched_edge_scores(model, graph, data.source, writer_values(model, graph, data.clean), metric,
                                   data.clean, progress=progress)
    # noising: clean run, one edge ablated; the sign makes "helps the metric" positive
    return -batched_edge_scores(model, graph, data.clean, data.replacement, metric, progress=progress)


@register_method("eap", description="edge attribution patching: a gradient estimate of every edge at once")
def _eap(model: Any, graph: ModelGraph, data: PatchData, metric: Metric) -> Tensor:
    return eap_scores(model, graph, data.clean, data.source, metric, data.replacement)


@register_method("eap-ig", description="EAP with integrated gradients from the corrupted to the clean inputs",
                 options=(Option("steps", "int", help="EAP-IG interpolation steps", minimum=1),))
def _eap_ig(model: Any, graph: ModelGraph, data: PatchData, metric: Metric, steps: int = 5,
            progress: bool = False) -> Tensor:
    return eap_ig_scores(model, graph, data.clean, data.source, metric, steps, data.baseline_values, progress=progress)


@register_method("acdc", description="prune edges whose removal moves the metric by less than a threshold (ACDC)",
                 options=(Option("threshold", "float", help="ACDC's search threshold", minimum=0),))
def _acdc(model: Any, graph: ModelGraph, data: PatchData, metric: Metric, threshold: float = 0.01,
          progress: bool = False) -> Tensor:
    return acdc_scores(model, graph, data.clean, data.replacement, metric, threshold, progress=progress)


def patch_data(model: Any, graph: ModelGraph, clean: Any, corrupted: Any, ablation: Ablation, reference: Any = None) -> PatchData:
    source = ablation.source_batch(clean, corrupted)
    values = ablation.source_values(model, graph, clean, corrupted, reference)
    with torch.no_grad():
        replacement = stack_writers(model, graph, values)
    return PatchData(clean, source, replacement, values)


def discover(
    model: Any,
    clean: Any,
    corrupted: Any = None,
    *,
    metric: str | Metric = "logprob",
    method: str = "eap",
    ablation: Ablation | None = None,
    by_position: bool = True,
    reference: Any = None,
    progress: bool = False,
    **options: Any,
) -> EdgeScores:
    """Score every edge of ``model``'s graph with ``method``.

    Args:
        clean: a :class:`~interp_rand.tasks.Batch` (or ``[batch, pos]`` tokens).
        corrupted: the corrupted batch (needed by ``resample`` ablation).
        metric: a registered metric name or ``metric(logits, batch) -> scalar``.
        ablation: what ablated edges carry (default ``Ablation("resample")``, which uses
            ``corrupted``).
        by_position: position-resolved edges (else each edge spans all positions).
        reference: the reference set for ``mean`` ablation (default: ``clean``).
        options: method options (``steps`` for eap-ig, ``threshold`` for acdc).
        progress: report progress on stderr (:mod:`interp_rand.progress`); methods whose
            signature takes ``progress`` also report their loop.
    """
    fn = DISCOVERY_METHODS.get(method)
    ablation = Ablation("resample") if ablation is None else ablation
    metric_fn = get_metric(metric)
    n_pos = (clean if isinstance(clean, Tensor) else clean.inputs).shape[1]
    graph = ModelGraph.of(model, n_pos, by_position)
    data = patch_data(model, graph, clean, corrupted, ablation, reference)
    loud = {"progress": True} if progress and "progress" in inspect.signature(fn).parameters else {}
    with stage(f"scoring {graph.n_edges} edges ({method}, {len(clean)} pairs)", enabled=progress):
        scores = fn(model, graph, data, metric_fn, **options, **loud)
    settings = {
        "method": method,
        "metric": metric if isinstance(metric, str) else getattr(metric, "__name__", "custom"),
        "ablation": ablation.to_dict(),
        "options": options,
        "n_examples": len(clean),
    }
    return EdgeScores(graph, scores.detach().float(), settings)


__all__ = ["DISCOVERY_METHODS", "DiscoveryMethod", "PatchData", "discover", "method_names", "patch_data", "register_method"]
