"""Is a circuit a property of the model, or of the data, the training run and the method that
found it? Agreement matrices of circuits found under each:

- :func:`across_resamples`: the same method on bootstrap resamples of the pairs (and on all of
  them);
- :func:`across_models`: the same method on models of one recipe trained from different seeds
  (same architecture; e.g. the reproduction's training seeds);
- :func:`across_methods`: exact patching, EAP, EAP-IG, ACDC on the same model and data.

Each entry compares two circuits of ``k`` edges (chosen by the same selection rule): the
**Jaccard** overlap of their edge sets, and the **Spearman** rank correlation of ``|score|``
over every edge of the graph (the order the selection reads). A random pair of ``k``-edge sets
out of ``E`` has expected Jaccard about ``k / (2E - k)``: :attr:`AgreementMatrix.chance_jaccard`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch

from circuits.analyses.agreement import spearman
from circuits.graph.scores import EdgeScores
from circuits.graph.selection import select
from circuits.interventions.ablation import Ablation
from circuits.methods.discovery import discover


@dataclass(frozen=True)
class AgreementMatrix:
    """Attributes:
    what: what varies between the circuits (``"methods"``, ``"data resamples"``, ...).
    labels: one per circuit.
    jaccard, spearman: ``[i][j]`` agreement of circuits ``i`` and ``j`` (symmetric, 1 on the
        diagonal; ``spearman`` is ``None`` where a score vector is constant).
    k, selection: the circuit size and the selection rule.
    n_edges: edges in the graph (for the chance level).
    """

    what: str
    labels: tuple[str, ...]
    jaccard: tuple[tuple[float, ...], ...]
    spearman: tuple[tuple[float | None, ...], ...]
    k: int
    selection: str
    n_edges: int

    def _off(self, table) -> list[float]:
        n = len(self.labels)
        return [table[i][j] for i in range(n) for j in range(i + 1, n) if table[i][j] is not None]

    @property
    def mean_jaccard(self) -> float:
        values = self._off(self.jaccard)
        return float(sum(values) / len(values)) if values else float("nan")

    @property
    def min_jaccard(self) -> float:
        return float(min(self._off(self.jaccard), default=float("nan")))

    @property
    def mean_spearman(self) -> float:
        values = self._off(self.spearman)
        return float(sum(values) / len(values)) if values else float("nan")

    @property
    def chance_jaccard(self) -> float:
        """Expected Jaccard of two random ``k``-edge sets of the graph (``k / (2E - k)``)."""
        k, n = self.k, self.n_edges
        return k / (2 * n - k) if 0 < k < 2 * n else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "mean_jaccard": self.mean_jaccard, "min_jaccard": self.min_jaccard,
                "mean_spearman": self.mean_spearman, "chance_jaccard": self.chance_jaccard}


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def agreement_matrix(scores: dict[str, EdgeScores], k: int, *, selection: str = "greedy",
                     what: str = "") -> AgreementMatrix:
    """Pairwise agreement of the ``k``-edge circuits of ``scores`` (all over one graph)."""
    if len(scores) < 2:
        raise ValueError(f"need at least two sets of scores to compare; got {len(scores)}")
    graphs = {s.graph for s in scores.values()}
    if len(graphs) != 1:
        raise ValueError("the scores belong to different graphs (architectures, positions or by_position differ)")
    labels = tuple(scores)
    edge_sets = [set(select(scores[label], k, selection).edges) for label in labels]
    magnitudes = [scores[label].values().abs() for label in labels]
    n = len(labels)
    jac = tuple(tuple(_jaccard(edge_sets[i], edge_sets[j]) for j in range(n)) for i in range(n))

    def rank(i: int, j: int) -> float | None:
        if i == j:
            return 1.0
        if bool((magnitudes[i] == magnitudes[i][0]).all()) or bool((magnitudes[j] == magnitudes[j][0]).all()):
            return None
        return spearman(magnitudes[i], magnitudes[j])

    spear = tuple(tuple(rank(i, j) for j in range(n)) for i in range(n))
    return AgreementMatrix(what, labels, jac, spear, k, selection, graphs.pop().n_edges)


def across_methods(model: Any, clean: Any, corrupted: Any = None, *, k: int,
                   methods: tuple[str, ...] = ("exact", "eap", "eap-ig", "acdc"), metric: str = "logprob",
                   ablation: Ablation | None = None, selection: str = "greedy", by_position: bool = True,
                   options: dict[str, dict[str, Any]] | None = None) -> AgreementMatrix:
    scores = {m: discover(model, clean, corrupted, metric=metric, method=m, ablation=ablation,
                          by_position=by_position, **(options or {}).get(m, {})) for m in methods}
    return agreement_matrix(scores, k, selection=selection, what="methods")


def across_resamples(model: Any, clean: Any, corrupted: Any = None, *, k: int, method: str = "eap",
                     n_resamples: int = 5, seed: int = 0, metric: str = "logprob", ablation: Ablation | None = None,
                     selection: str = "greedy", by_position: bool = True, full: EdgeScores | None = None,
                     **options: Any) -> AgreementMatrix:
    """The circuit on all pairs (``"all"``: ``full`` when given, e.g. scores of a claim card) and
    on ``n_resamples`` bootstrap resamples of them."""
    if n_resamples < 1:
        raise ValueError(f"n_resamples={n_resamples!r} must be at least 1")
    generator = torch.Generator().manual_seed(seed)
    scores = {"all": full if full is not None else discover(
        model, clean, corrupted, metric=metric, method=method, ablation=ablation, by_position=by_position, **options)}
    for i in range(n_resamples):
        rows = torch.randint(len(clean), (len(clean),), generator=generator)
        scores[f"resample {i + 1}"] = discover(model, clean[rows], None if corrupted is None else corrupted[rows],
                                               metric=metric, method=method, ablation=ablation,
                                               by_position=by_position, **options)
    return agreement_matrix(scores, k, selection=selection, what="data resamples")


def across_models(models: dict[str, Any], clean: Any, corrupted: Any = None, *, k: int, method: str = "eap",
                  metric: str = "logprob", ablation: Ablation | None = None, selection: str = "greedy",
                  by_position: bool = True, **options: Any) -> AgreementMatrix:
    """The circuit of each model (one recipe, different training seeds) on the same pairs."""
    scores = {label: discover(m, clean, corrupted, metric=metric, method=method, ablation=ablation,
                              by_position=by_position, **options) for label, m in models.items()}
    return agreement_matrix(scores, k, selection=selection, what="training seeds")


__all__ = ["AgreementMatrix", "across_methods", "across_models", "across_resamples", "agreement_matrix"]
