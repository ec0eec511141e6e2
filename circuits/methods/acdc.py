"""ACDC-style threshold search (Conmy et al. 2023), on exact edge patching.

Start from the full graph on the clean run. Visit readers from the logits backwards (reverse
topological order); for each incoming edge, ablate it on top of the edges removed so far and
keep the removal when the metric moves by less than ``threshold``. An edge's score is the
signed change its removal caused when it was tested (``metric(with) − metric(without)``), so
``|score| >= threshold`` is exactly the set ACDC kept. A query or MLP input whose node has no
kept outgoing edge at that position, or a key/value input of a head with no kept outgoing edge
anywhere, cannot affect the output; its edges are removed without a forward pass (score 0).

**Batching.** Each test runs against the kept set left by every earlier test, so the tests are
sequential: whether edge ``k`` is tested with edge ``k − 1`` ablated depends on that test's
outcome. Two facts still let one forward carry many tests:

* Everything a reader's tests change is at or after that reader's block (the edges removed so
  far go into it or into later readers), so each forward starts there from the clean run's
  cache (:func:`~circuits.interventions.batched_patching.run_with_edge_sets`).
* Within one reader, the order of the tests is fixed before the first of them: the "cannot
  reach the output" checks read only the node's outgoing edges, which were all decided at later
  readers. :func:`acdc_scores` therefore evaluates the next ``K`` tests *speculatively*, test
  ``j`` with tests ``1..j−1`` assumed removed (ACDC removes most edges). Walking the results in
  order, every test up to and including the first kept edge was evaluated on exactly the kept
  set the sequential search would have used; the rest are discarded and re-run from there.
  ``K`` doubles after a fully accepted block and after a kept edge becomes the number of
  removals just before it (so a run of kept edges costs one forward each, as sequentially).
  With ``threshold=0`` no removal is ever accepted, so every test is evaluated on its own
  against the kept set and nothing is discarded. So the kept set
  is the sequential search's (:func:`acdc_scores_sequential`, the reference), and the scores
  agree up to float rounding. Across readers nothing is batched: a reader's checks read the
  decisions about its node's outgoing edges, made at the readers visited just before.

**Incremental tests.** On our model a test does not rerun blocks: an
:class:`~circuits.interventions.incremental_run.IncrementalRun` holds the forward under the
current kept set node by node, and a test recomputes only the tested node at the positions its
removals touch and what that reaches through the *kept* edges (late in the search, little);
an accepted removal's recomputed values become the run's state (``commit``). Everything else
is read from that state. A TransformerBridge, the input MLP's inputs and ``incremental=False``
take the block path above. Both paths are one engine,
:class:`~circuits.interventions.batched_patching.PatchRun`, which the search hands each batch
of tests as edge lists. Both are pinned to :func:`acdc_scores_sequential` (same kept edges,
scores within 1e-5) in ``tests/circuits/interventions/test_batched_patching.py``, including the
zoo's sort, addition, colouring and recall models.

What this buys: ``bench/patching.py`` prints the reference, the block path and the incremental
path side by side (the figures are in docs/benchmarks.md).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from circuits.graph.architecture import run_model
from circuits.interventions.batched_patching import DEFAULT_MEMORY_BUDGET, PatchRun
from circuits.interventions.edge_patching import run_with_edges
from circuits.graph.model_graph import ModelGraph
from circuits.interventions.metrics import Metric, evaluate_metric
from interp_rand.progress import bar


def _check_threshold(threshold: float) -> None:
    if threshold < 0:
        raise ValueError(f"ACDC threshold={threshold} must be >= 0")


def _reachable(graph: ModelGraph, keep: Tensor, r: int, slot: int, w_out: int | None) -> bool:
    """Can reader ``r``'s input at ``slot`` still reach the output? Not when it is a query or MLP
    input whose node writes nothing kept at this slot, or a key/value input of a head that
    writes nothing kept at all."""
    if w_out is None:
        return True
    which = graph.readers[r][1]
    return bool(keep[slot, w_out].any() if which in ("q", "mlp") else keep[:, w_out].any())


def acdc_scores(
    model: Any, graph: ModelGraph, clean: Any, replacement: Tensor, metric: Metric, threshold: float = 0.01,
    progress: bool = False, max_batch: int | None = None, memory_budget: int = DEFAULT_MEMORY_BUDGET,
    incremental: bool = True,
) -> Tensor:
    """Scores ``[n_slots, n_writers, n_readers]``; ``threshold_mask(threshold)`` is ACDC's circuit.

    Up to ``max_batch`` tests per forward (default as many as fit ``memory_budget`` bytes),
    evaluated speculatively (module docstring); the kept set is :func:`acdc_scores_sequential`'s.
    On our model (``incremental``) a test recomputes only the tested node and what it reaches
    through the kept edges (:class:`~circuits.interventions.incremental_run.IncrementalRun`),
    and an accepted removal becomes that run's state; elsewhere (a TransformerBridge, the input
    MLP's edges, ``incremental=False``) each test runs from its reader's block
    (:func:`~circuits.interventions.batched_patching.run_with_edge_sets`).
    """
    _check_threshold(threshold)
    keep = graph.mask.clone()
    scores = torch.zeros(graph.shape)
    run = PatchRun(model, graph, clean, replacement, incremental)
    current = float(evaluate_metric(metric, run.logits, clean))
    size = 4
    writer_of = {n.at(None): i for i, n in enumerate(graph.writers)}
    for r in bar(range(len(graph.readers) - 1, -1, -1), desc="ACDC: pruning the inputs of each node",
                 enabled=progress):
        w_out = writer_of.get(graph.readers[r][0])
        limit = run.copies(int(run.stage_of[r]), len(clean), memory_budget, max_batch)
        size = min(size, limit)
        # the reader's tests in the sequential order; None marks an unreachable slot's removal
        events: list[tuple[int, int | None]] = []
        for slot in range(graph.n_slots):
            if not _reachable(graph, keep, r, slot, w_out):
                events.append((slot, None))
                continue
            events += [(slot, w) for w in reversed(graph.valid[:, r].nonzero()[:, 0].tolist())]
        i = 0
        while i < len(events):
            while i < len(events) and events[i][1] is None:  # removed without a forward pass
                keep[events[i][0], :, r] = False
                i += 1
            if i == len(events):
                break
            # speculative keep masks: test j with every test before it (from i) removed; with
            # threshold 0 no removal is ever accepted, so each test is on its own
            tests, removed, done, j = [], [], [], i
            while j < len(events) and len(tests) < size:
                slot, w = events[j]
                if w is not None:
                    # (copy, slot, writer) of each copy's tested removals (the unreachable-slot
                    # removals between them change nothing downstream of the node)
                    done = [(slot, w)] if threshold == 0 else done + [(slot, w)]
                    removed += [(len(tests), s_, w_) for s_, w_ in done]
                    tests.append(j)
                j += 1
            copy, slot_, writer_ = torch.tensor(removed).unbind(1)
            updates = [] if threshold > 0 else None
            logits = run.evaluate(copy, slot_, writer_, torch.full_like(copy, r), keep, updates)
            accepted = 0
            for e, j in enumerate(tests):
                for k in range(i, j):  # unreachable-slot removals between the tests
                    assert events[k][1] is None
                    keep[events[k][0], :, r] = False
                slot, w = events[j]
                value = float(evaluate_metric(metric, logits[e], clean))
                change = current - value
                i = j + 1
                if abs(change) < threshold:
                    keep[slot, w, r] = False
                    current = value
                    scores[slot, w, r] = change
                    accepted += 1
                else:
                    scores[slot, w, r] = change if change != 0 else threshold
                    if threshold > 0:  # the later masks assumed this edge removed
                        break
            if updates and accepted:  # the last accepted copy is the kept set now
                run.commit(updates, accepted - 1)
            # grow while the guesses hold; after a kept edge, guess as far as the last run went
            size = min(limit, 2 * size) if accepted == len(tests) or threshold == 0 else max(1, accepted)
    return scores


def acdc_scores_sequential(
    model: Any, graph: ModelGraph, clean: Any, replacement: Tensor, metric: Metric, threshold: float = 0.01,
    progress: bool = False,
) -> Tensor:
    """The reference search: one forward per test, on :func:`run_with_edges` (slow)."""
    _check_threshold(threshold)
    keep = graph.mask.clone()
    scores = torch.zeros(graph.shape)
    with torch.no_grad():
        current = float(evaluate_metric(metric, run_model(model, clean), clean))
    writer_of = {n.at(None): i for i, n in enumerate(graph.writers)}
    for r in bar(range(len(graph.readers) - 1, -1, -1), desc="ACDC: pruning the inputs of each node",
                 enabled=progress):
        w_out = writer_of.get(graph.readers[r][0])
        for slot in range(graph.n_slots):
            if not _reachable(graph, keep, r, slot, w_out):
                keep[slot, :, r] = False
                continue
            for w in reversed(graph.valid[:, r].nonzero()[:, 0].tolist()):
                keep[slot, w, r] = False
                value = float(evaluate_metric(metric, run_with_edges(model, graph, clean, keep, replacement), clean))
                change = current - value
                if abs(change) < threshold:
                    current = value
                    scores[slot, w, r] = change
                else:
                    keep[slot, w, r] = True
                    scores[slot, w, r] = change if change != 0 else threshold
    return scores


__all__ = ["acdc_scores", "acdc_scores_sequential"]
