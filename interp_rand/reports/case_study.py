"""A case study of a trained run in one call (what ``interp-rand case-study`` prints and
writes). It leads with the study's **mechanism** (:mod:`interp_rand.reports.mechanisms`): the
algorithm in pseudocode and its card, a verdict per check. The carry and sort studies then add
the edge-level study: its claims with verdicts against their controls, its circuit and claim
card, and the details behind them.

    >>> report = case_study_report("carry", seed=0)          # default run: the mechanism's zoo run
    >>> print(report.text()); report.write("out/carry")     # case_study.json/.html, mechanism.json, circuit.json
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_rand.output.files import json_text
from interp_rand.registry import Registry
from interp_rand.display import Displayed


# the case studies and the task of the runs each reads (light: the command line's choices);
# each is also the name of its flagship mechanism (interp_rand.reports.mechanisms)
STUDY_TASKS: Registry[str] = Registry("case study", plural="case studies")
for _study, _task in (("carry", "addition"), ("sort", "sort"), ("recall-seed", "recall"), ("coloring-seed", "coloring")):
    STUDY_TASKS.register(_study, _task, description=f"the case study of {_task} runs")
STUDIES = tuple(STUDY_TASKS)
# the studies with an edge-level study besides their mechanism
EDGE_STUDIES = ("carry", "sort")


@dataclass(frozen=True)
class Study:
    """What a case study needs: the task of the runs it reads, its config class, the study and
    the functions turning its result into claims and detail lines; ``from_mechanism(card,
    module)``: the config settings the study takes from its checked mechanism (or ``None``);
    ``components(result)``: the components the edge-level study names (placed in the mechanism
    and its rivals, ``components_label`` says what they are)."""

    task: str
    config: Any
    run: Any
    claims: Any
    details: Any
    metric: Any = "logprob"
    pairs: str = ""
    from_mechanism: Any = None
    components: Any = lambda result: ()
    components_label: str = "the edge-level study's components"


def studies() -> Registry[Study]:
    """The edge-level studies by name (``carry``: addition, ``sort``: sort)."""
    from interp_rand.reports.case_studies import CarryConfig, SortConfig, carry_study, sort_study
    from interp_rand.reports.case_studies.carry import carry_metric
    from interp_rand.reports.case_studies.claims import carry_claims, carry_details, sort_claims, sort_details

    table: Registry[Study] = Registry("edge-level case study", plural="edge-level case studies")
    table.register("carry", Study(STUDY_TASKS.get("carry"), CarryConfig, carry_study, carry_claims, carry_details,
                                  metric=carry_metric, pairs="carry-flip pairs (one operand digit edited; the answer "
                                  "digits whose carry-in flips)",
                                  from_mechanism=lambda card, module: {
                                      "probe_hook": carry_layer(card, module.CARRY_VARIABLES)},
                                  components=lambda result: result.components,
                                  components_label="the carry components"))
    table.register("sort", Study(STUDY_TASKS.get("sort"), SortConfig, sort_study, sort_claims, sort_details,
                                 pairs="the task's corruption (one list element changed)",
                                 components=lambda result: result.heads, components_label="the next-element heads"))
    return table


@dataclass(repr=False)
class CaseStudyReport(Displayed):
    """Attributes:
    study: the study's name; run: the checkpoint folder read.
    mechanism: the study's :class:`~interp_rand.reports.mechanism.MechanismReport` (the
    algorithm and its card).
    result: the edge-level study's result (:class:`~interp_rand.reports.case_studies.CarryStudy`
    or ``SortStudy``; ``None`` for a mechanism-only study). claims: its claims with verdicts;
    lines: the mechanism card's lines, then one line per edge-level claim, the summary line and
    the details. data: what case_study.json holds; title: the page's title; card: the edge-level
    circuit's claim card.
    """

    study: str
    run: str
    mechanism: Any
    result: Any
    claims: list[Any]
    lines: list[str]
    data: dict[str, Any]
    title: str
    card: Any = None

    # every file write() may write (an edge-level study's circuit and card besides the mechanism)
    FILES = ("case_study.json", "mechanism.json", "case_study.html", "circuit.json", "card.json", "card.html")

    def to_json(self) -> str:
        return json_text(self.data, indent=1)

    def figure(self) -> Any:
        """The study's mechanism graph as a plotly figure (the page's first figure), for a notebook."""
        return self.mechanism.figure()

    def text(self) -> str:
        from interp_rand.reports.circuit import card_lines

        return "\n".join(self.lines + ([] if self.card is None else card_lines(self.card)))

    def headline(self) -> str:
        """One line: the mechanism's verdict and, for an edge-level study, its claims' and card's."""
        line = self.mechanism.card.headline()
        if self.result is not None:
            from interp_rand.verdicts import summary_line

            line += f"; edge-level study: {summary_line(self.claims).removeprefix('verdicts: ')}"
            if self.card is not None:
                line += f"; circuit card {self.card.verdict.upper()}"
        return line

    def page_headline(self) -> Any:
        """The page's headline: the mechanism's checks and, for an edge-level study, its claims
        and circuit card; one verdict over all of them (FAILS when any fails), naming the first
        that does not hold."""
        from interp_rand.figures.headline import overall_verdict
        from interp_rand.figures.headline import Headline

        mech = self.mechanism.page_headline()
        if self.result is None:
            return mech
        claims = [*self.mechanism.card.claims, *self.claims, *([] if self.card is None else self.card.claims)]
        word = overall_verdict(c.verdict.outcome for c in claims)
        bad = [c for c in claims if not c.verdict.holds]
        number = (f"{mech.number} (mechanism); {sum(c.verdict.holds for c in self.claims)} of {len(self.claims)} "
                  "edge-level claims hold" + ("" if self.card is None else f"; circuit card {self.card.verdict.upper()}"))
        return Headline(f"the {self.study} case study on {self.run}", number, word,
                        failing=f"{bad[0].text}: {bad[0].verdict.reason}" if bad else None)

    def write(self, out: str | Path) -> Path:
        """case_study.json, mechanism.json, case_study.html (the mechanism's headline, drawing,
        algorithm and checks, then the edge-level circuit and ablation figures) and, for an
        edge-level study, circuit.json and its card."""
        import html

        from interp_rand.figures.html_page import write_page
        from interp_rand.reports.case_studies.draw import study_figures
        from interp_rand.reports.mechanism import claims_html

        from interp_rand.output import replace_files, write_text

        out = Path(out)
        with replace_files(out, self.FILES) as stage:
            write_text(stage / "case_study.json", self.to_json())
            write_text(stage / "mechanism.json", self.mechanism.to_json())
            sections: list[Any] = list(self.mechanism.sections())
            if self.result is not None:
                self.result.circuit.save(stage / "circuit.json")
                if self.card is not None:
                    from interp_rand.reports.circuit import write_card

                    write_card(self.card, stage)
                details = self.lines[len(self.mechanism.lines) + len(self.claims) + 2:]
                card = ("" if self.card is None else
                        f"<p>claim card of the circuit: <a href='card.html'>{self.card.verdict.upper()}</a></p>")
                sections += ["<h2>The edge-level study</h2>", claims_html(self.claims), card,
                             *study_figures(self.result), "<details><summary>details</summary><pre>"
                             + html.escape("\n".join(details)) + "</pre></details>"]
            write_page(stage / "case_study.html", self.title, sections, headline=self.page_headline())
        return out


def explained_mechanism(model: Any, task: Any, label: str, seed: int, n: int | None, progress: bool) -> Any:
    """The mechanism :func:`circuits.explain.explain` finds, as the study's mechanism report:
    the chosen candidate (or, when the experiments cannot separate the survivors, the best
    ranked, said so) with its card, the other candidates as its rivals."""
    from interp_rand.progress import note
    from interp_rand.reports.explain import explain_report
    from interp_rand.reports.mechanism import MechanismReport

    found = explain_report(model=model, task=task, seed=seed, **({"n": n} if n else {}),
                           progress=lambda text: note(text, progress)).explanation
    name = found.stated or found.ranked[0]
    others = [v.mechanism for key, v in found.located.items() if key != name]
    report = MechanismReport(found.located[name].mechanism, found.cards[name], label, f"mechanism {name}: {label}",
                             found.comparison, others)
    report.explanation = found
    return report


def carry_layer(card: Any, carries: tuple[str, ...]) -> str | None:
    """The residual hook where the mechanism's carry variables hold under interchange (the one
    most of them hold at), or ``None`` when none holds: the carry study's "carry layer"."""
    from collections import Counter

    from circuits.mechanisms.card import variable_claim

    held = [c.site.split("@")[0] for c in card.interchange
            if c.variable in carries and variable_claim(c).verdict.holds]
    return Counter(held).most_common(1)[0][0] if held else None


def case_study_report(study: str, run: str | Path | None = None, *, seed: int = 0, n_controls: int = 10,
                      n: int | None = None, card: bool = True, card_resamples: int = 2,
                      progress: bool = False) -> CaseStudyReport:
    """Run case study ``study`` (:data:`STUDIES`) on ``run`` (a run of its task or ``zoo:NAME``;
    default: its mechanism's zoo run): the mechanism's card, and for an edge-level study
    (:data:`EDGE_STUDIES`) the study itself with ``seed`` of every draw, ``n_controls`` random
    control sets, ``n`` evaluation examples (default: the study's own) and, with ``card``, the
    claim card of the study's circuit (``card_resamples`` resampled-data circuits). A bad option
    is refused before the run is read."""
    from interp_rand.verdicts import summary_line, verdict_counts
    from interp_rand.reports.mechanism import mechanism_report
    from interp_rand.reports.mechanisms import flagship
    from interp_rand.training.checkpoint import CheckpointError, load_checkpoint
    from interp_rand.run_names import run_label

    if study not in STUDY_TASKS:
        raise ValueError(f"unknown case study {study!r}; choose from {sorted(STUDY_TASKS)}")
    run = flagship(study).RUN if run is None else run
    try:
        ckpt = load_checkpoint(run, task=STUDY_TASKS.get(study))
    except CheckpointError as err:
        raise CheckpointError(f"case study {study!r} needs a {STUDY_TASKS.get(study)} run: {err}") from None
    model, task = ckpt.model().eval(), ckpt.spec.make_task()
    from interp_rand.progress import note

    module = flagship(study)
    reason = module.applies(model, task) if hasattr(module, "applies") else None
    if reason is None:
        note(f"checking the {study} mechanism (interchange per variable, causal scrubbing, predictions)", progress)
        mechanism = mechanism_report(study, model=model, task=task, seed=seed, **({"n": n} if n else {}))
    else:  # another shape: the mechanism the search finds, not the flagship's hand-written one
        note(f"the {study} flagship does not apply ({reason}); explain searches for the mechanism", progress)
        mechanism = explained_mechanism(model, task, run_label(run), seed, n, progress)
        mechanism.origin = f"mechanism found by explain: the hand-written {study} mechanism does not apply ({reason})"
    note(f"mechanism: {mechanism.card.verdict.upper()} ({mechanism.card.seconds:.0f} s)", progress)
    mechanism.run = run_label(run)
    mechanism.title = f"mechanism {mechanism.mechanism.name}: {run_label(run)}"
    title = f"{study} case study: {run_label(run)}"
    data: dict[str, Any] = {"study": study, "run": str(ckpt.path), "mechanism": mechanism.to_dict()}
    if study not in EDGE_STUDIES:
        return CaseStudyReport(study=study, run=str(ckpt.path), mechanism=mechanism, result=None, claims=[],
                               lines=list(mechanism.lines), data=data, title=title)
    spec = studies().get(study)
    config = spec.config(seed=seed, n_controls=n_controls)
    config = dataclasses.replace(config, n_eval=n) if n else config
    if spec.from_mechanism is not None and reason is None:
        config = dataclasses.replace(config, **spec.from_mechanism(mechanism.card, module))
    result = spec.run(model, task, config, progress=progress)
    claims, details = spec.claims(result), spec.details(result)
    details += mechanism.placement_lines(spec.components(result), spec.components_label)
    lines = list(mechanism.lines) + ["edge-level study:"] + [c.line() for c in claims] + [summary_line(claims)] + details
    data.update({"claims": [c.to_dict() for c in claims], "verdicts": verdict_counts(claims), "details": details,
                 **result.to_dict()})
    claim = None
    if card:
        from interp_rand.reports.circuit import circuit_card

        clean, corrupted = result.pairs
        claim = circuit_card(model, clean, corrupted, result.circuit, result.edge_scores, method="eap",
                             metric=spec.metric, selection="connected", pairs=spec.pairs,
                             subject=f"{study} study circuit, {run_label(run)}: eap, {len(result.circuit)} edges",
                             n_resamples=card_resamples, seed=seed, progress=progress)
    if claim is not None:
        data["card"] = {"verdict": claim.verdict, "cpr": claim.integrals.cpr, "cmd": claim.integrals.cmd,
                        "sufficiency": claim.sufficiency, "necessity": claim.necessity}
    return CaseStudyReport(study=study, run=str(ckpt.path), mechanism=mechanism, result=result, claims=claims,
                           lines=lines, data=data, title=title, card=claim)


__all__ = ["EDGE_STUDIES", "STUDIES", "STUDY_TASKS", "CaseStudyReport", "Study", "carry_layer", "case_study_report",
           "studies"]
