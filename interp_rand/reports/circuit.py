"""The circuit report of a trained run in one call (what ``interp-rand circuit`` prints and
writes): discover a circuit, measure its faithfulness and draw it.

    >>> report = circuit_report("zoo:sort", method="eap", n=256, seed=0)
    >>> report.summary["recovered"], len(report.circuit)
    >>> report.write("out/sort-circuit")   # circuit.json/.graphml/.dot/.tracer.json, faithfulness.json, circuit.html
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_rand import progress as _progress
from interp_rand.display import Displayed
from interp_rand.output.files import json_text
from interp_rand.reports.inputs import analysis_inputs

from interp_rand.defaults import DEFAULT_SEED


def position_names(model: Any, task: Any) -> list[str]:
    """Names of the model's positions: the task's, after a seed token if the model has one."""
    from interp_rand.model.hook_names import seed_offset

    return ["seed"] * int(seed_offset(model)) + list(task.position_names())


def _once(label: str) -> str:
    """``SEP: SEP`` as ``SEP`` (a position named by the token it always holds)."""
    name, _, held = label.partition(": ")
    return name if held == name else label


def example_tokens(model: Any, task: Any, batch: Any, row: int = 0) -> tuple[list[str], list[int] | None,
                                                                           list[int] | None]:
    """Example ``row`` of ``batch`` per residual-stream position: its labels (``x3: 7``, the
    task's :meth:`token_labels`; ``seed`` for a seed token), and its input and target token ids
    (``None`` for vector inputs or targets; -1 where a position has none)."""
    from interp_rand.model.hook_names import seed_offset

    k = int(seed_offset(model))
    labels = ["seed"] * k + [_once(str(t)) for t in task.token_labels(batch, row)]

    def ids(t: Any) -> list[int] | None:
        return [-1] * k + [int(v) for v in t[row]] if t is not None and t.dim() == 2 and not t.is_floating_point() else None

    return labels, ids(batch.inputs), ids(batch.targets)


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
                  metric: str = "logprob", target: float = 0.8, selection: str = "connected",
                  progress: bool = False) -> Any:
    """The top ``top_k`` edges chosen by ``selection`` (:mod:`circuits.graph.selection`), or with
    ``"auto"`` (or ``None``) the smallest faithful circuit."""
    from circuits import smallest_faithful_circuit
    from circuits.graph.selection import select

    if top_k in (None, "auto"):
        _progress.note("choosing the smallest faithful circuit", progress)
        return smallest_faithful_circuit(model, scores, pairs.clean, pairs.corrupted, metric=metric,
                                         ablation=ablation, target=target, selection=selection,
                                         progress=progress)[0]
    return select(scores, top_k, selection)


def check_circuit_fits(path: str | Path, settings: dict[str, Any], task: Any, n_positions: int) -> None:
    """Refuse a saved circuit made for another task, or for another number of positions (the
    same architecture on another task configuration), saying which task and run it was made
    for; settings it does not record are not checked."""
    made = settings.get("task")
    where = f" (run {settings['run']})" if settings.get("run") else ""
    here = task.name
    config = task.config_dict() if hasattr(task, "config_dict") else {}
    options = ", ".join(f"{k}={v!r}" for k, v in config.items())
    if made is not None and made != here:
        raise ValueError(f"{path} is a circuit of the {made!r} task{where}; this run is of the {here!r} task "
                         f"({options}): find its own circuit with `interp-rand circuit`")
    if settings.get("n_positions") not in (None, n_positions):
        raise ValueError(f"{path} was made for {settings['n_positions']} positions of the {made or 'unknown'!r} "
                         f"task{where}; this run's {here!r} task ({options}) has {n_positions}: a circuit of "
                         "another task configuration")


def check_circuit_options(method: str, top_k: int | str | None, threshold: float | None,
                          circuit: str | Path | None) -> None:
    """Refuse contradictory size options before any work."""
    if top_k is not None and threshold is not None and method != "acdc":
        raise ValueError("give --top-k or --threshold, not both")
    if threshold is not None and threshold < 0:
        raise ValueError(f"--threshold={threshold} must be >= 0")
    if circuit is not None and (top_k is not None or threshold is not None):
        raise ValueError("--circuit measures the given circuit: --top-k and --threshold do not apply")


def circuit_card(model: Any, clean: Any, corrupted: Any, circuit: Any, scores: Any, *, progress: bool = False,
                 **kwargs: Any) -> Any:
    """The claim card (:func:`circuits.analyses.claim_card.claim_card`) of ``circuit``, chosen from
    ``scores`` on the ``clean``/``corrupted`` pairs, with progress on stderr; ``None``
    (said on stderr) when no share is defined, so the rest of the report is still written."""
    from circuits.analyses.claim_card import claim_card

    _progress.note(f"the claim card of {kwargs.get('subject', 'the circuit')}: random circuits, the "
                   f"random-initialised model, integrals over sizes, {kwargs.get('n_resamples', 2)} resampled "
                   "circuits", progress)
    try:
        return claim_card(model, clean, corrupted, circuit=circuit, scores=scores, **kwargs)
    except ValueError as err:  # e.g. the corruption does not move the model: no share is defined
        _progress.note(f"no claim card: {err}", True)
        return None


def card_lines(card: Any) -> list[str]:
    """A claim card's verdict, its trained gap (every share's denominator) and its claims, each
    line followed by the claim's rule."""
    return [f"claim card ({card.subject}): {card.verdict.upper()} (CPR {card.integrals.cpr:.3f}, "
            f"CMD {card.integrals.cmd:.3f}; the trained model's gap {card.gap:.4g} {card.found_with['metric']}, "
            "the denominator of every share)",
            *(line for c in card.claims for line in (c.line(), f"  rule: {c.verdict.rule}"))]


def write_card(card: Any, out: Path, stem: str = "card") -> None:
    """``{stem}.json`` and ``{stem}.html`` of ``card`` in ``out`` (a staging folder of
    :func:`interp_rand.output.replace_files`)."""
    from circuits.draw.claim_card import write_claim_card
    from interp_rand.output import write_json

    write_json(out / f"{stem}.json", card.to_dict(), indent=1)
    write_claim_card(card, out / f"{stem}.html")


def card_files(stem: str = "card") -> tuple[str, str]:
    """The files :func:`write_card` writes."""
    return f"{stem}.json", f"{stem}.html"


@dataclass(repr=False)
class CircuitReport(Displayed):
    """Attributes:
    circuit: the discovered (or given) :class:`~circuits.Circuit`, its settings naming the run.
    faithfulness: its :class:`~circuits.Faithfulness`.
    summary: what faithfulness.json holds (method, discovery seconds, the faithfulness figures).
    title: the drawing's title (run, method, size); label: the run's name; attention: mean attention per layer for the drawing (None
    over all positions); position_names: the model's position names.
    card: the circuit's :class:`~circuits.analyses.claim_card.ClaimCard` (``None`` for a given
    ``--circuit``, which has no scores to integrate, or when not asked for).
    qk: ``(QKAttribution, QKPatchCheck)`` per head asked for with ``qk_heads``, drawn on the
    circuit and summarised in ``summary["qk"]``.
    example: the first clean example's label per position (``x3: 7``), for the drawing's axis and
    node table (``None``: the task's position names instead).
    tracer: the circuit as a circuit-tracer / Neuronpedia graph on that example
    (:func:`circuits.graph.tracer_export.to_circuit_tracer`), written as circuit.tracer.json.
    """

    circuit: Any
    faithfulness: Any
    summary: dict[str, Any]
    title: str
    attention: Any
    position_names: list[str]
    card: Any = None
    qk: tuple = ()
    label: str = "the model"
    example: list[str] | None = None
    tracer: dict[str, Any] | None = None

    # every file write() may write; those a write does not produce (a card) are removed with it
    FILES = ("circuit.json", "circuit.graphml", "circuit.dot", "circuit.tracer.json", "faithfulness.json",
             "circuit.html", *card_files())

    def to_json(self) -> str:
        return json_text(self.summary)

    def key_numbers(self) -> dict[str, Any]:
        """The summary without the curve and the bootstrap spread (what the CLI prints)."""
        return {k: v for k, v in self.summary.items() if k not in ("curve", "spread", "qk")}

    def qk_lines(self) -> list[str]:
        """One line per explained head: its top contributors and the patching check's verdict."""
        return [f"a{c.layer}.{c.head}@{c.query}: top {', '.join(c.top)}; removed, the pattern moves "
                f"{c.top_change:.3f} vs {c.random_mean:.3f} for random contributors: {c.verdict}"
                + (" (the query sees one key: its softmax pattern is 1 whatever the scores, so the check cannot "
                   "tell anything)" if c.pattern_fixed else "") for _, c in self.qk]

    def card_lines(self) -> list[str]:
        """The claim card's verdict and its claims, one line each (nothing without a card)."""
        return [] if self.card is None else card_lines(self.card)

    def lines(self) -> list[str]:
        """What the command prints: the key numbers, the card's claims, the explained heads
        (a notebook's view, :class:`~interp_rand.display.Displayed`)."""
        numbers = [f"{k}: {v}" for k, v in self.key_numbers().items() if not isinstance(v, (dict, list))]
        return [str(self.headline())] + numbers + self.card_lines() + self.qk_lines()

    def small_figure(self) -> str | None:
        """The card's claims, each value against its control; without a card, the circuit's
        strongest edges."""
        from interp_rand.display import claims_svg

        return claims_svg(self.card.claims) if self.card is not None else self.circuit.small_figure()

    def headline(self) -> Any:
        """The drawing page's :class:`~interp_rand.figures.headline.Headline`: the circuit, the
        share it recovers and its card's verdict (linked to the card), naming the claim that
        fails; without a card, no verdict."""
        from interp_rand.figures.headline import Headline

        measured = f"circuit of {self.label} ({self.summary['method']}, {len(self.circuit)} of {self.circuit.total_edges} edges)"
        number = f"recovers {self.summary['recovered']:.2f}"
        if self.card is None:
            return Headline(measured, number + " (no claim card)")
        from circuits.draw.claim_card import card_headline

        card = card_headline(self.card, link="card.html")
        return Headline(measured, f"{number} · card {self.card.verdict.upper()}", self.card.verdict, card.failing,
                        "card.html")

    def figure_title(self) -> str:
        """The drawing's title: the run and method, then what the circuit recovers and its card's
        verdict, linked to the card page."""
        card = "" if self.card is None else (
            f" · <a href='card.html'>card {self.card.verdict.upper()}</a>")
        return f"{self.title} — recovers {self.summary['recovered']:.2f}{card}"

    def figure(self) -> Any:
        """The circuit's drawing as a plotly figure (what circuit.html shows), for a notebook."""
        from circuits.draw.circuit_figure import circuit_figure

        return circuit_figure(self.circuit, self.figure_title(), attention=self.attention,
                              position_names=self.example or self.position_names, qk=self.qk)

    def write_tracer(self, path: Path) -> Path:
        """circuit.tracer.json: :attr:`tracer`, or without one the circuit on the position names
        (no token ids), checked against its schema."""
        from circuits.graph.tracer_export import check_circuit_tracer, to_circuit_tracer
        from interp_rand.output import write_json

        data = self.tracer or to_circuit_tracer(None, self.circuit, self.example or self.position_names,
                                                name=self.title)
        check_circuit_tracer(data)
        return write_json(path, data, indent=1)

    def write(self, out: str | Path) -> Path:
        """circuit.json, circuit.graphml, circuit.dot, circuit.tracer.json (with an example),
        faithfulness.json and circuit.html (the headline, the drawing, the node table) in ``out``."""
        from circuits.draw.circuit_figure import write_circuit_html
        from interp_rand.output import replace_files, write_text

        out = Path(out)
        with replace_files(out, self.FILES) as stage:
            self.circuit.save(stage / "circuit.json")
            self.circuit.write_graphml(stage / "circuit.graphml")
            self.circuit.write_dot(stage / "circuit.dot")
            self.write_tracer(stage / "circuit.tracer.json")
            write_text(stage / "faithfulness.json", self.to_json())
            if self.card is not None:
                write_card(self.card, stage)
            write_circuit_html(self.circuit, stage / "circuit.html", self.figure_title(), headline=self.headline(),
                               attention=self.attention, position_names=self.example or self.position_names,
                               qk=self.qk)
        return out


def circuit_report(run: str | Path | None = None, *, model: Any = None, task: Any = None, seed_source: str = "fresh",
                   method: str = "eap", metric: str | None = None, ablation: str = "resample",
                   n: int = 256, pairs: str = "task", seed: int = DEFAULT_SEED, top_k: int | str | None = None,
                   target: float = 0.8, threshold: float | None = None, options: dict[str, Any] | None = None,
                   selection: str = "connected", by_position: bool = True, card: bool = True,
                   card_resamples: int = 2, card_random: int = 20,
                   n_resamples: int = 5, circuit: str | Path | None = None,
                   qk_heads: tuple[tuple[int, int, int], ...] = (), progress: bool = False) -> CircuitReport:
    """Score every edge of ``run``'s model on ``n`` clean/corrupted ``pairs`` of its task, keep a
    circuit (``top_k`` edges, those above ``threshold``, ACDC's own, or by default the smallest
    faithful one reaching ``target``), or measure the saved ``circuit`` instead, and measure its
    faithfulness (``n_resamples`` bootstrap resamples), and with ``card`` its claim card
    (``card_random`` random circuits, ``card_resamples`` resampled-data circuits). ``options``: the method's options (its
    registry entry lists them; e.g. ``{"steps": 5}`` for eap-ig); ACDC's search threshold is
    ``threshold`` (default 0.01). ``qk_heads``: ``(layer, head, query position)`` (a
    residual-stream position; a seed token is 0) whose query/key attribution and patching check
    (:func:`probes.qk_attribution.explain_heads`, on the clean inputs) are drawn on the circuit:
    why those heads attend where they do.

    ``model`` and ``task`` (a registered task or a :class:`~interp_rand.tasks.spec.TaskSpec`)
    in place of ``run``: a model of your own (``seed_source="fixed"``: trained on the task's r0)."""
    from circuits import Ablation, Circuit, discover, faithfulness
    from circuits.analyses.flow import mean_attention
    from interp_rand.run_names import run_label

    check_circuit_options(method, top_k, threshold, circuit)
    inputs = analysis_inputs(run, n, seed, pairs, model=model, task=task, seed_source=seed_source,
                             what="circuit_report")
    model, task, data = inputs.model, inputs.task, inputs.pairs
    metric = metric or getattr(task, "metric", "logprob")  # a TaskSpec names the metric that fits it
    label = run_label(run) if run is not None else f"model ({task.name})"
    if qk_heads:
        from probes.report import check_qk_heads

        check_qk_heads(model, task, qk_heads)
    abl = Ablation(ablation, seed=seed)
    options = dict(options or {})
    if method == "acdc":
        options["threshold"] = 0.01 if threshold is None else threshold
    start = time.perf_counter()
    if circuit is not None:
        found, scores = Circuit.load(circuit, model), None
        by_position = bool(found.settings.get("by_position", True))
        check_circuit_fits(circuit, found.settings, task, data.clean.inputs.shape[1] + getattr(model.cfg, "seed_offset", 0))
    else:
        check_top_k(top_k, model, data, by_position=by_position)
        scores = discover(model, data.clean, data.corrupted, metric=metric, method=method,
                          ablation=abl, by_position=by_position, progress=progress, **options)
        if method == "acdc" and top_k is None:
            found = scores.circuit(threshold=options["threshold"])
        elif threshold is not None:
            found = scores.circuit(threshold=threshold)
        else:
            found = top_k_circuit(scores, top_k, model, data, abl, metric=metric, target=target,
                                  selection=selection, progress=progress)
    seconds = time.perf_counter() - start
    found = dataclasses.replace(found, settings={**found.settings, "by_position": by_position,
                                "run": inputs.source, "task": task.name, "data_seed": seed})
    _progress.note(f"measuring the faithfulness of {len(found)} edges", progress)
    result = faithfulness(model, found, data.clean, data.corrupted, metric=metric, ablation=abl, scores=scores,
                          n_resamples=n_resamples, seed=seed, selection=selection, progress=progress)
    name = str(circuit) if circuit else method
    summary = {"method": name, "discovery_seconds": round(seconds, 3), **result.to_dict()}
    claim = None
    if card and scores is not None:
        claim = circuit_card(model, data.clean, data.corrupted, found, scores, method=method, metric=metric,
                             ablation=abl, selection=selection, by_position=by_position, options=options,
                             pairs=f"{pairs} pairs of {task.name} (seed {seed})",
                             subject=f"{label}: {method}, {len(found)} edges", n_random=card_random,
                             n_resamples=card_resamples, seed=seed, progress=progress)
    qk: tuple = ()
    if qk_heads:
        from probes.qk_attribution import explain_heads

        _progress.note(f"query/key attribution of {len(qk_heads)} head(s)", progress)
        qk = explain_heads(model, data.clean, qk_heads, seed=seed)
        summary["qk"] = [{"attribution": a.to_dict(), "patching_check": c.to_dict()} for a, c in qk]
    from circuits.graph.tracer_export import to_circuit_tracer

    labels, token_ids, target_ids = example_tokens(model, task, data.clean)
    tracer = to_circuit_tracer(model, found, [t.split(": ", 1)[-1] for t in labels], token_ids=token_ids,
                               target_ids=target_ids, name=f"{label} {name}")
    return CircuitReport(
        circuit=found, faithfulness=result, summary=summary,
        title=f"{label}: {name}, {len(found)} of {found.total_edges} edges",
        attention=mean_attention(model, data.clean) if by_position else None,
        position_names=position_names(model, task), card=claim, qk=qk, label=label, example=labels, tracer=tracer)


__all__ = ["CircuitReport", "DEFAULT_SEED", "card_lines", "circuit_card", "write_card", "check_circuit_options", "check_top_k", "circuit_report", "example_tokens",
           "position_names", "top_k_circuit"]
