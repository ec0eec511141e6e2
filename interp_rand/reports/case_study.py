"""A case study of a trained run in one call (what ``interp-rand case-study`` prints and
writes): the study, its claims with verdicts against their controls, the details behind them.

    >>> report = case_study_report("carry", "zoo:addition", seed=0)
    >>> print("\\n".join(report.lines)); report.write("out/carry")   # case_study.json/.html, circuit.json
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


# the case studies and the task of the runs each reads (light: the command line's choices)
STUDY_TASKS = {"carry": "addition", "sort": "sort"}
STUDIES = tuple(STUDY_TASKS)


@dataclass(frozen=True)
class Study:
    """What a case study needs: the task of the runs it reads, its config class, the study and
    the functions turning its result into claims and detail lines."""

    task: str
    config: Any
    run: Any
    claims: Any
    details: Any
    metric: Any = "logprob"
    pairs: str = ""


def studies() -> dict[str, Study]:
    """The case studies by name (``carry``: addition, ``sort``: sort)."""
    from interp_rand.reports.case_studies import CarryConfig, SortConfig, carry_study, sort_study
    from interp_rand.reports.case_studies.carry import carry_metric
    from interp_rand.reports.case_studies.claims import carry_claims, carry_details, sort_claims, sort_details

    return {"carry": Study(STUDY_TASKS["carry"], CarryConfig, carry_study, carry_claims, carry_details,
                           metric=carry_metric, pairs="carry-flip pairs (one operand digit edited; the answer "
                           "digits whose carry-in flips)"),
            "sort": Study(STUDY_TASKS["sort"], SortConfig, sort_study, sort_claims, sort_details,
                          pairs="the task's corruption (one list element changed)")}


@dataclass
class CaseStudyReport:
    """Attributes:
    study: the study's name; run: the checkpoint folder read; result: the study's result object
    (:class:`~interp_rand.reports.case_studies.CarryStudy` or ``SortStudy``).
    claims: its claims with verdicts; lines: one line per claim, the summary line, then the details.
    data: what case_study.json holds; title: the page's title.
    """

    study: str
    run: str
    result: Any
    claims: list[Any]
    lines: list[str]
    data: dict[str, Any]
    title: str
    card: Any = None

    def to_json(self) -> str:
        return json.dumps(self.data, indent=1)

    def text(self) -> str:
        from interp_rand.reports.circuit import card_lines

        return "\n".join(self.lines + ([] if self.card is None else card_lines(self.card)))

    def write(self, out: str | Path) -> Path:
        """case_study.json, circuit.json and case_study.html (drawing and ablation figures) in ``out``."""
        from interp_rand.reports.case_studies.draw import study_figures, write_case_study_html

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "case_study.json").write_text(self.to_json())
        self.result.circuit.save(out / "circuit.json")
        if self.card is not None:
            from interp_rand.reports.circuit import write_card

            write_card(self.card, out)
        write_case_study_html(out / "case_study.html", self.title, self.lines, study_figures(self.result))
        return out


def case_study_report(study: str, run: str | Path, *, seed: int = 0, n_controls: int = 10, n: int | None = None,
                      card: bool = True, card_resamples: int = 2, progress: bool = False) -> CaseStudyReport:
    """Run case study ``study`` (see :func:`studies`) on ``run`` (a run of its task or
    ``zoo:NAME``): ``seed`` of every draw, ``n_controls`` random control sets, ``n`` evaluation
    examples (default: the study's own); with ``card``, the claim card of the study's circuit
    (``card_resamples`` resampled-data circuits). A bad option is refused before the run is read."""
    from circuits.analyses.verdict import summary_line, verdict_counts
    from interp_rand.training.checkpoint import CheckpointError, load_checkpoint
    from interp_rand.zoo.location import run_label

    known = studies()
    if study not in known:
        raise ValueError(f"unknown case study {study!r}; choose from {sorted(known)}")
    spec = known[study]
    config = spec.config(seed=seed, n_controls=n_controls)
    config = dataclasses.replace(config, n_eval=n) if n else config
    try:
        ckpt = load_checkpoint(run, task=spec.task)
    except CheckpointError as err:
        raise CheckpointError(f"case study {study!r} needs a {spec.task} run: {err}") from None
    model = ckpt.model().eval()
    result = spec.run(model, ckpt.spec.make_task(), config, progress=progress)
    claims, details = spec.claims(result), spec.details(result)
    lines = [c.line() for c in claims] + [summary_line(claims)] + details
    data = {"study": study, "run": str(ckpt.path), "claims": [c.to_dict() for c in claims],
            "verdicts": verdict_counts(claims), "details": details, **result.to_dict()}
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
    return CaseStudyReport(study=study, run=str(ckpt.path), result=result, claims=claims, lines=lines, data=data,
                           title=f"{study} case study: {run_label(run)}", card=claim)


__all__ = ["STUDIES", "STUDY_TASKS", "CaseStudyReport", "Study", "case_study_report", "studies"]
