"""The circuit comparison of two runs of one task in one call (what ``interp-rand compare``
prints and writes): a circuit per run, aligned, each measured on the other run (cross-
faithfulness), with one claim per finding judged against random circuits of the same sizes.

    >>> report = compare_report("zoo:recall-AE_R", "zoo:recall-Aq_R", n=128)
    >>> print("\\n".join(report.lines))        # one line per claim with its verdict
    >>> report.write("out/cmp")                # comparison.json/.html, circuit_a.json, circuit_b.json
"""

from __future__ import annotations

import dataclasses
import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_rand import progress as _progress
from interp_rand.display import Displayed
from interp_rand.output.files import json_text
from interp_rand.reports.circuit import (
    DEFAULT_SEED,
    card_files,
    card_lines,
    check_top_k,
    circuit_card,
    position_names,
    top_k_circuit,
    write_card,
)
from interp_rand.reports.inputs import analysis_inputs

# the summary keys the CLI prints
KEY_NUMBERS = ("task", "pairs", "behaviour_gap", "method", "top_k", "edges", "n_shared", "n_only_a", "n_only_b",
               "jaccard", "node_jaccard", "spearman_shared", "cross_faithfulness", "random_cross_faithfulness")


@dataclass(repr=False)
class ComparisonReport(Displayed):
    """In a notebook: the headline and verdict, each claim's value against its control, the
    claim lines; :meth:`figure` is the drawing comparison.html shows.

    Attributes:
    circuits: the two :class:`~circuits.Circuit` s (A, B); result: their
        :class:`~circuits.analyses.comparison.CircuitComparison`.
    claims: the comparison's claims with verdicts; lines: one line per claim and the summary line.
    gaps: each run's :func:`~circuits.analyses.faithfulness.behaviour_gap`; labels: the runs' labels.
    summary: what comparison.json holds; metric: the metric of the gaps.
    attention: per run the mean attention for the drawing (None over all positions);
    position_names: the models' position names.
    """

    circuits: tuple[Any, Any]
    result: Any
    claims: list[Any]
    lines: list[str]
    gaps: list[float]
    labels: tuple[str, str]
    summary: dict[str, Any]
    metric: str
    attention: Any
    position_names: list[str]
    cards: tuple[Any, Any] | None = None

    FILES = ("circuit_a.json", "circuit_b.json", "comparison.json", "comparison.html", *card_files("card_a"),
             *card_files("card_b"))  # every file write() may write

    def to_json(self) -> str:
        return json_text(self.summary)

    def key_numbers(self) -> dict[str, Any]:
        return {k: self.summary[k] for k in KEY_NUMBERS}

    def notes(self) -> list[str]:
        """A warning per run whose corruption barely moves its model."""
        from circuits.analyses.faithfulness import TINY_GAP

        return [f"note: on {label} the clean and corrupted runs differ by {gap:.2g} in {self.metric}: the "
                "corruption barely moves this model, so its circuit and faithfulness shares are noise"
                for label, gap in zip(self.labels, self.gaps) if abs(gap) < TINY_GAP]

    def text(self) -> str:
        """What the CLI prints: the key numbers (JSON), the claim lines and the notes."""
        cards = [line for card in (self.cards or ()) if card is not None for line in card_lines(card)]
        return "\n".join([json.dumps(self.key_numbers(), indent=2), "\n".join(self.lines), *cards, *self.notes()])

    def headline(self) -> Any:
        """The page's headline: the two circuits' overlap and cross-faithfulness, and one verdict
        over the claims (``fails`` when any fails, naming it; ``holds`` when all hold)."""
        from interp_rand.figures.headline import overall_verdict
        from interp_rand.figures.headline import Headline

        r, (la, lb) = self.result, self.labels
        dicts = [c.to_dict() for c in self.claims]
        verdict = overall_verdict(dicts)
        cross = ", ".join(f"{k[0].upper()} on {k[-1].upper()} {v:.2f}" for k, v in r.cross.items() if k[0] != k[-1])
        random = "n/a" if r.random_jaccard is None else f"{r.random_jaccard:.3f}"
        number = (f"{len(r.shared)} shared, Jaccard {r.jaccard:.3f} (random {random})"
                  + (f" · recovered share {cross}" if cross else ""))
        failing = next((c for c in dicts if c["verdict"] == "fails"), None) or next(
            (c for c in dicts if c["verdict"] == "inconclusive"), None)
        why = None
        if failing is not None:
            n_bad = sum(c["verdict"] == failing["verdict"] for c in dicts)
            text = failing["claim"].replace(f" ({la})", "").replace(f" ({lb})", "")  # A and B are named above
            word = "fail" if failing["verdict"] == "fails" else failing["verdict"]
            why = (f"{n_bad} of {len(dicts)} claims {word}, e.g. {text}"
                   + (f" — {failing['reason']}" if failing["reason"] else ""))
        return Headline(f"{self.summary['method']} circuits of A = {la} ({len(self.circuits[0])} edges), "
                        f"B = {lb} ({len(self.circuits[1])} edges)", number, verdict, failing=why)

    def figure(self) -> Any:
        """The two circuits side by side as a plotly figure (what comparison.html shows)."""
        from circuits.draw.comparison_figure import comparison_figure

        return comparison_figure(*self.circuits, self.result, attention=self.attention,
                                 position_names=self.position_names)

    def claims_table(self) -> str:
        """The claims with their verdicts (coloured), numbers and controls, as an HTML table."""
        from interp_rand.figures.style import verdict_colour

        def cell(x: Any) -> str:
            return "-" if x is None else f"{x:.3f}" if isinstance(x, float) else html.escape(str(x))

        rows = "".join(
            f"<tr><td class='l'>{html.escape(c.text)}</td>"
            f"<td style='color:{verdict_colour(c.verdict.outcome)}'><b>{c.verdict.outcome.upper()}</b></td>"
            f"<td>{cell(c.value)}</td><td>{cell(c.control)}</td><td class='l'>{html.escape(c.control_label)}</td>"
            f"<td class='l'>{html.escape(c.verdict.reason)}</td></tr>" for c in self.claims)
        return ("<h2>Claims</h2><div class='scroll'><table><tr><th style='text-align:left'>claim</th><th>verdict</th><th>value</th>"
                f"<th>control</th><th>control is</th><th>why not</th></tr>{rows}</table></div>"
                f"<p class='note'>{html.escape(self.lines[-1])}</p>"
                + "".join(f"<p class='note'>{html.escape(n)}</p>" for n in self.notes()))

    def write(self, out: str | Path) -> Path:
        """circuit_a.json, circuit_b.json, comparison.json and comparison.html (its headline, the
        figure, then the claims) in ``out``."""
        from circuits.draw.comparison_figure import write_comparison_html
        from interp_rand.output import replace_files, write_text

        out = Path(out)
        with replace_files(out, self.FILES) as stage:
            self.circuits[0].save(stage / "circuit_a.json")
            self.circuits[1].save(stage / "circuit_b.json")
            write_text(stage / "comparison.json", self.to_json())
            write_comparison_html(*self.circuits, self.result, stage / "comparison.html",
                                  headline=self.headline(), after=[self.claims_table()],
                                  attention=self.attention, position_names=self.position_names)
            for card, stem in zip(self.cards or (), ("card_a", "card_b")):
                if card is not None:
                    write_card(card, stage, stem)
        return out


def check_same_task(a: Any, b: Any) -> None:
    """Refuse two models (:class:`~interp_rand.reports.inputs.RunInputs`) of different tasks,
    task configs or architectures."""
    from circuits import architecture

    if a.task.name != b.task.name:
        raise ValueError(f"the runs are of different tasks: {a.task.name!r} vs {b.task.name!r}")
    config_a, config_b = a.task.config_dict(), b.task.config_dict()
    if config_a != config_b:
        diff = sorted(k for k in config_a.keys() | config_b.keys() if config_a.get(k) != config_b.get(k))
        raise ValueError(f"the runs have different task configs ({', '.join(diff)})")
    mismatch = architecture(a.model).mismatch(architecture(b.model))
    if mismatch:
        raise ValueError("the runs have different architectures (A vs B): " + "; ".join(mismatch))


def compare_report(run_a: str | Path | None = None, run_b: str | Path | None = None, *, model_a: Any = None,
                   model_b: Any = None, task: Any = None, method: str = "eap-ig", metric: str = "logprob",
                   ablation: str = "resample", top_k: int | str | None = "auto", target: float = 0.8, n: int = 128,
                   pairs: str = "task", seed: int = DEFAULT_SEED, options: dict[str, Any] | None = None,
                   selection: str = "connected", by_position: bool = True, card: bool = True,
                   card_resamples: int = 2,
                   n_controls: int = 3, progress: bool = False) -> ComparisonReport:
    """Discover a circuit in ``run_a`` and in ``run_b`` (same task and architecture) on ``n``
    ``pairs`` each drawn with ``seed``, compare them and judge each claim against random
    circuits of the same sizes (``n_controls`` per cross-faithfulness measurement). Models of
    your own: ``model_a``/``model_b`` in place of either run, with their ``task`` (a task or a
    :class:`~interp_rand.tasks.spec.TaskSpec`)."""
    from circuits import Ablation, discover
    from circuits.analyses.comparison import compare_circuits, comparison_claims, seed_comparison_claims
    from circuits.analyses.faithfulness import TINY_GAP, behaviour_gap
    from circuits.analyses.flow import mean_attention
    from interp_rand.verdicts import summary_line, verdict_counts
    from interp_rand.run_names import run_label

    a, b = (analysis_inputs(run, n, seed, pairs, model=given, task=task, what="compare_report",
                            check_architecture=True) for run, given in ((run_a, model_a), (run_b, model_b)))
    check_same_task(a, b)
    check_top_k(top_k, a.model, a.pairs, by_position=by_position)
    abl = Ablation(ablation, seed=seed)
    options = dict(options or {})
    found, all_scores = [], []
    labels = tuple(run_label(run) if run is not None else f"model {x}" for run, x in ((run_a, "A"), (run_b, "B")))
    for k, (label, inputs) in enumerate(zip(labels, (a, b)), 1):
        _progress.note(f"run {k} of 2 ({label}): discovering its circuit", progress)
        scores = discover(inputs.model, inputs.pairs.clean, inputs.pairs.corrupted, metric=metric, method=method,
                          ablation=abl, by_position=by_position, progress=progress, **options)
        circuit = top_k_circuit(scores, top_k, inputs.model, inputs.pairs, abl, metric=metric, target=target,
                                selection=selection, progress=progress)
        all_scores.append(scores)
        found.append(dataclasses.replace(circuit, settings={
            **circuit.settings, "by_position": by_position, "run": inputs.source,
            "task": inputs.task.name, "data_seed": seed}))
    _progress.note("aligning the circuits and measuring each on the other run (cross-faithfulness)", progress)
    result = compare_circuits(*found, models=(a.model, b.model),
                              data=((a.pairs.clean, a.pairs.corrupted), (b.pairs.clean, b.pairs.corrupted)),
                              metric=metric, ablation=abl, labels=labels, n_random=n_controls, seed=seed)
    gaps = [behaviour_gap(x.model, x.pairs.clean, x.pairs.corrupted, metric) for x in (a, b)]
    # seed pairs (a randomized model against its ERM twin): the claims state the expected finding
    claims = (seed_comparison_claims(result, tuple(gaps), min_gap=TINY_GAP) if pairs == "seed"
              else comparison_claims(result, tuple(gaps), min_gap=TINY_GAP))
    lines = [c.line() for c in claims] + [summary_line(claims)]
    summary = {"run_a": str(run_a) if run_a is not None else labels[0],
               "run_b": str(run_b) if run_b is not None else labels[1], "task": a.task.name,
               "pairs": pairs, "behaviour_gap": gaps,
               "method": method, "top_k": top_k,
               "edges": [len(found[0]), len(found[1])], "n": n,
               "claims": [c.to_dict() for c in claims], "verdicts": verdict_counts(claims), **result.to_dict()}
    cards = None
    if card:
        cards = tuple(circuit_card(x.model, x.pairs.clean, x.pairs.corrupted, c, sc, method=method, metric=metric,
                                   ablation=abl, selection=selection, by_position=by_position, options=options,
                                   pairs=f"{pairs} pairs of {x.task.name} (seed {seed})",
                                   subject=f"{label}: {method}, {len(c)} edges", n_resamples=card_resamples,
                                   seed=seed, progress=progress)
                      for x, c, sc, label in zip((a, b), found, all_scores, labels))
    attention = None if not by_position else (mean_attention(a.model, a.pairs.clean),
                                             mean_attention(b.model, b.pairs.clean))
    return ComparisonReport(circuits=(found[0], found[1]), result=result, claims=claims, lines=lines, gaps=gaps,
                            labels=labels, summary=summary, metric=metric, attention=attention,
                            position_names=position_names(a.model, a.task), cards=cards)


__all__ = ["ComparisonReport", "KEY_NUMBERS", "check_same_task", "compare_report"]
