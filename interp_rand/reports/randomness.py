"""The randomness report in one call (what ``interp-rand randomness`` prints and writes): how a
seeded model uses its randomness channel. Per run: the usage score per node (seed-resample
patching), where seed information enters (seed vs input variance, seed-bit probes per layer),
a random-init control, and the analyses registered for its task (recall: the stored-set map
over all seeds and the per-seed mechanism; colouring: symmetry breaking and the learned rule).

    >>> report = randomness_report("zoo:recall-Aq_R", compare="zoo:recall-AE_R", n=2048)
    >>> report.summary["recall-Aq_R"]["usage whole model (reference)"]
    >>> print(report.text()); report.write("out/rand")   # randomness.json and randomness.html

For a model of your own, :func:`analyse_model` gives one run's entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_rand import progress as _progress
from interp_rand.display import Displayed
from interp_rand.registry import Registry
from interp_rand.output.files import json_text

from interp_rand.defaults import DEFAULT_SEED


def load_seeded(run: str | Path) -> Any:
    """The checkpoint of ``run``, refused unless its model and task have a seed channel."""
    from interp_rand.training.checkpoint import load_checkpoint

    ckpt = load_checkpoint(run)
    task = ckpt.spec.make_task()
    if not getattr(ckpt.spec.model_config, "has_seed", False) or not hasattr(task, "sample_seeds"):
        raise ValueError(f"{run}: task {task.name!r} / this model has no seed channel")
    return ckpt


# ------------------------------------------------------------------ per-task analyses

# ``analysis(model, task, out, *, batch, generator, seed_source, stored_inputs, seed, label, progress)``
# adds its entries to the run's dict ``out``; registered per task name.
TaskAnalysis = Callable[..., None]
RANDOMNESS_ANALYSES: Registry[TaskAnalysis] = Registry("randomness analysis", plural="randomness analyses")


def register_randomness_analysis(task_name: str) -> Callable[[TaskAnalysis], TaskAnalysis]:
    """Decorator: run ``fn`` in the randomness report of every run of task ``task_name``
    (:data:`RANDOMNESS_ANALYSES`; a second, different analysis for the same task is refused)."""
    return RANDOMNESS_ANALYSES.add(task_name, description=f"the randomness report's analysis of {task_name} runs")


# keyed by task name: fn(first model, second model, task, first run's dict, *, seed, progress),
# run when the report compares two runs of that task (e.g. a randomized model and its ERM twin)
RANDOMNESS_PAIR_ANALYSES: Registry[TaskAnalysis] = Registry("randomness pair analysis",
                                                            plural="randomness pair analyses")


def register_randomness_pair_analysis(task_name: str) -> Callable[[TaskAnalysis], TaskAnalysis]:
    """Decorator: run ``fn`` on the two models of every two-run randomness report of task
    ``task_name`` (:data:`RANDOMNESS_PAIR_ANALYSES`)."""
    return RANDOMNESS_PAIR_ANALYSES.add(task_name, description=f"the randomness report's analysis of two {task_name} runs")


# where the noise decides (interp_rand.seeded_evaluation.noise_use): cycles, and noise draws on each
NOISE_USE_CYCLES, NOISE_USE_DRAWS = 4000, 16
# the key-code study's size (circuits.analyses.recall_codes): the same inputs under every one of the seeds
CODE_INPUTS, CODE_SEEDS = 1000, 64


@register_randomness_analysis("recall")
def _recall(model, task, out, *, batch, generator, seed_source, stored_inputs, seed, label, progress) -> None:
    import torch

    from interp_rand.reports.randomness_mechanism import recall_mechanism
    from probes.stored_set import stored_set_map

    _progress.note(f"{label}: stored-set map ({stored_inputs} inputs x every seed)", progress)
    # the key/value inputs stored_set_map draws next, for the per-seed mechanism lines
    inputs = task.sample(stored_inputs, torch.Generator().set_state(generator.get_state()))
    stats, stored = stored_set_map(model, task, stored_inputs, generator)
    out["stored_set"] = stats.to_dict()
    out["mechanism"] = recall_mechanism(model, task, seed_source, inputs, stored, seed)
    from circuits.analyses.recall_codes import check_architecture, code_study

    try:
        check_architecture(model)
    except ValueError as err:
        out["codes"] = {"skipped": str(err)}
        return
    _progress.note(f"{label}: key codes, signal and crosstalk ({CODE_INPUTS} inputs x {CODE_SEEDS} seeds)", progress)
    out["codes"] = code_study(model, task, n_inputs=CODE_INPUTS, n_seeds=CODE_SEEDS, seed=seed).to_dict()


@register_randomness_analysis("coloring")
def _coloring(model, task, out, *, batch, generator, seed_source, stored_inputs, seed, label, progress) -> None:
    from interp_rand.reports.randomness_mechanism import coloring_mechanism
    from probes.symmetry import colour_noise_information, noise_resample_effect

    _progress.note(f"{label}: symmetry breaking (colour vs noise rank, noise resampling)", progress)
    out["symmetry"] = {
        "information": colour_noise_information(model, task, batch, generator).to_dict(),
        "resample": noise_resample_effect(model, task, batch, generator).to_dict(),
    }
    out["mechanism"] = coloring_mechanism(model, task, batch, seed)


# ------------------------------------------------------------------ one run

FIXED_SEED_USAGE_NOTE = "r0 only: the usage score's fresh seeds are outside its training"
# what the seed decides (circuits.analyses.randomness.success_usage): the same inputs under these many seeds
DECIDES_INPUTS, DECIDES_SEEDS = 512, 32
DECIDES_MEANING = ("what the seed decides: the probability that the model is right under one seed and wrong under "
                   "another, for the same input (0: the seed decides nothing; a network that passes its seed through "
                   "but is rarely right scores near 0)")


def analyse_model(model: Any, task: Any, *, seed_source: str = "fresh", n: int = 2048, stored_inputs: int = 32,
                  seed: int = DEFAULT_SEED, label: str = "model", progress: bool = False) -> dict[str, Any]:
    """Every randomness analysis that fits ``task``, for ``model``, as one JSON-ready dict
    (``usage``, ``entry``, ``random_init`` and the task's own entries); ``seed_source``: how the
    model was trained (``"fixed"``: on r0 only); ``label`` names it in the progress lines."""
    import torch

    from circuits.analyses.randomness import (randomness_usage, residual_stream_hooks, seed_entry, seed_probe,
                                              success_usage)
    from probes.controls import random_init_like

    generator = torch.Generator().manual_seed(seed)
    batch = task.sample(n, generator)
    _progress.note(f"{label}: randomness-usage score per node ({n} examples)", progress)
    out: dict[str, Any] = {"usage": randomness_usage(model, batch, task.loss_kind, per_position=True, seed=seed,
                                                     progress=progress).to_dict()}
    # the usage score resamples seeds: for a model trained on r0 alone every resampled seed is
    # one it never saw, so its score measures sensitivity off its training, not a learned use
    out["usage"]["seeds_in_training"] = FIXED_SEED_USAGE_NOTE if seed_source == "fixed" else "fresh seeds"
    inputs, seeds = task.sample(64, generator), task.sample_seeds(64, generator)
    probe_batch = task.sample(n, generator)
    _progress.note(f"{label}: where seed information enters (variance, seed-bit probes)", progress)
    out["entry"] = seed_entry(model, task, inputs, seeds, probe_batch=probe_batch, generator=generator).to_dict()
    # control: the same architecture with fresh random weights uses its seed by accident only,
    # and a probe reads the seed bits from its residual stream as well as the embedding allows
    _progress.note(f"{label}: random-init control", progress)
    random_model = random_init_like(model)
    control = randomness_usage(random_model, batch, task.loss_kind, seed=seed, progress=progress)
    out["random_init"] = {"reference": control.reference, "reference_flip": control.reference_flip,
                          "score": control.score,
                          "seed_probe": seed_probe(random_model, probe_batch, residual_stream_hooks(random_model),
                                                   torch.Generator().manual_seed(seed))[0]}
    # what the seed decides: success under one seed and not another, for the model and its control
    _progress.note(f"{label}: what the seed decides ({DECIDES_INPUTS} inputs x {DECIDES_SEEDS} seeds)", progress)
    decide_inputs, decide_seeds = task.sample(DECIDES_INPUTS, generator), task.sample_seeds(DECIDES_SEEDS, generator)
    out["decides"] = success_usage(model, task, decide_inputs, decide_seeds).to_dict()
    out["random_init"]["decides"] = success_usage(random_model, task, decide_inputs, decide_seeds).to_dict()
    analysis = RANDOMNESS_ANALYSES.get(task.name) if task.name in RANDOMNESS_ANALYSES else None
    if analysis is not None:
        analysis(model, task, out, batch=batch, generator=generator, seed_source=seed_source,
                 stored_inputs=stored_inputs, seed=seed, label=label, progress=progress)
    return out


def analyse_run(run: str | Path, n: int = 2048, stored_inputs: int = 32, seed: int = DEFAULT_SEED,
                progress: bool = False) -> dict[str, Any]:
    """:func:`analyse_model` of ``run``'s model, with what the run is (name, task, step, objective)."""
    ckpt = load_seeded(run)
    train = ckpt.spec.train_config
    head = {"name": Path(run).name, "run": str(run), "task": ckpt.spec.make_task().name, "step": ckpt.step,
            "objective": train.objective, "q": train.q, "seed_source": train.seed_source}
    return {**head, **analyse_model(ckpt.model(), ckpt.spec.make_task(), seed_source=train.seed_source, n=n,
                                    stored_inputs=stored_inputs, seed=seed, label=str(run), progress=progress)}


def key_numbers(run: dict[str, Any]) -> dict[str, Any]:
    """The numbers printed per run (and stored as the report's summary)."""
    from interp_rand.reports.randomness_mechanism import mechanism_numbers

    usage, entry = run["usage"], run["entry"]
    row: dict[str, Any] = {"seeds in training": usage.get("seeds_in_training", "fresh seeds")}
    if "decides" in run:
        row["the seed decides success (P right under one seed, wrong under another)"] = run["decides"]["decides"]
        row["the seed decides success, random-init control"] = run["random_init"]["decides"]["decides"]
        row["inputs whose success depends on the seed"] = run["decides"]["inputs_seed_dependent"]
        row["success over inputs and seeds"] = run["decides"]["success"]
    row.update({f"usage {k}": v for k, v in usage["score"].items()})
    row["usage whole model (reference)"] = usage["reference"]
    row["answer flip, whole model"] = usage["reference_flip"]
    row["usage whole model, random-init control"] = run["random_init"]["reference"]
    row.update({f"seed fraction {h}": f for h, f in zip(entry["hooks"], entry["seed_fraction"])})
    row["seed enters at"] = entry["entry"]
    row.update({f"seed probe {h}": a for h, a in zip(entry["hooks"], entry["probe_accuracy"])})
    row.update({f"seed probe {h}, random-init control": a
                for h, a in zip(entry["hooks"], run["random_init"]["seed_probe"])})
    row["seed probe chance"] = entry["probe_chance"]
    if "stored_set" in run:
        s = run["stored_set"]
        row.update({"stored: mean size": s["mean_size"], "stored: coverage TV from uniform": s["coverage_tv"],
                    "stored: co-storage gap": s["costorage_gap"], "stored: seed-dependent cells": s["seed_dependent"],
                    "stored: worst-position coverage": s["worst_position_coverage"],
                    "stored: min coverage": min(s["coverage"])})
    if "symmetry" in run:
        info, effect = run["symmetry"]["information"], run["symmetry"]["resample"]
        row.update({"MI(colour; noise rank) bits": info["mi"], "MI shuffled control": info["mi_shuffled"],
                    "MI given vertex id": info["mi_given_id"], "colour from rank accuracy": info["rank_accuracy"],
                    "majority colour accuracy": info["majority_accuracy"]})
        row.update({f"colour change, noise at distance {d}": r for d, r in zip(effect["distance"], effect["change_rate"])})
    use = run.get("noise_use")
    if use is not None:
        row.update({"noise decides (share of vertices)": use["decided"],
                    "noise decides, where the compared run is in conflict": use["decided_where_conflict"],
                    "noise decides, elsewhere": use["decided_elsewhere"],
                    "compared run in conflict, where the noise decides": use["conflict_where_decided"],
                    "compared run in conflict, elsewhere": use["conflict_elsewhere"]})
    codes = run.get("codes", {})
    if "failure_rate" in codes:
        row.update({"codes: (a) crosstalk AUC": codes["interference_auc"], "codes: (a) signal-only AUC": codes["signal_auc"],
                    "codes: (b) overlap correlation across seeds": codes["overlap_correlation"],
                    "codes: (b) collisions under every seed": codes["collide_every_seed"],
                    "codes: (b) inputs failing under every seed": codes["fail_every_seed"],
                    "codes: (c) rescue by a separating seed": codes["rescue_switch"],
                    "codes: (c) rescue by a seed where the pair still collides":
                        codes["details"].get("rescue_still_colliding", float("nan")),
                    "codes: (c) rescue by a random seed": codes["rescue_random"],
                    **{f"codes: (c) rescue by the separating seed's {k.replace('_', ' ')} alone": v
                       for k, v in codes["details"].get("transplant", {}).items() if k not in ("n_cases", "whole_seed")},
                    **{f"codes: (c) any failure: rescue by another seed's {k.replace('_', ' ')}"
                       + ("" if k == "whole_seed" else " alone"): v
                       for k, v in codes["details"].get("transplant_any", {}).items() if k != "n_cases"},
                    "codes: (d) oblivious adversary's failure": codes["oblivious_adversary"]})
    row.update(mechanism_numbers(run))
    return row


def randomness_claims(runs: list[dict[str, Any]]) -> list[Any]:
    """The claims the report makes about its first run, each judged by the one verdict rule
    (:func:`interp_rand.verdicts.exceeds`, its default margin and ratio): its seed decides its
    success (:data:`DECIDES_MEANING`) beyond its random-init control (the same architecture,
    random weights: a pass-through of the seed, rarely right) and beyond the compared run (e.g.
    its ERM twin); recall: the key-code claims against the compared run; recall: it mixes
    strategies (:class:`interp_rand.seeded_evaluation.mixing.MixingStrategies`' own rule);
    colouring: its learned rule agrees with the classical routine beyond shuffled noise."""
    from interp_rand.verdicts import Claim, Verdict, exceeds, meets

    first = runs[0]
    name = first["name"]
    if "decides" in first:  # use for the task: the seed decides success (a pass-through scores near 0)
        decides = first["decides"]["decides"]
        claims = [exceeds(f"{name}'s seed decides its success beyond its random-init control (P right under one "
                          "seed, wrong under another)", decides, first["random_init"]["decides"]["decides"],
                          control_label="the random-init control")]
        if len(runs) > 1 and "decides" in runs[1]:
            claims.append(exceeds(f"{name}'s seed decides its success beyond {runs[1]['name']}'s", decides,
                                  runs[1]["decides"]["decides"], control_label=runs[1]["name"]))
    else:  # a report written before the measure existed
        usage = first["usage"]["reference"]
        claims = [exceeds(f"{name} uses its seed beyond its random-init control (whole-model usage, mean TV)", usage,
                          first["random_init"]["reference"], control_label="the random-init control")]
        if len(runs) > 1:
            claims.append(exceeds(f"{name} uses its seed beyond {runs[1]['name']} (whole-model usage, mean TV)", usage,
                                  runs[1]["usage"]["reference"], control_label=runs[1]["name"]))
    mix = first.get("mechanism", {}).get("mixing")
    if mix is not None:
        other = runs[1].get("mechanism", {}).get("mixing") if len(runs) > 1 else None
        rule = (f"size / capacity >= {mix['size_tolerance']:g} and set diversity >= {mix['diversity_bound']:g}")
        ratio, diversity = mix["size_ratio"], mix["set_diversity"]
        if mix["mixes"]:
            outcome, why = "holds", ""
        elif ratio is None or diversity is None:  # capacity 0, or fewer than two seeds
            outcome, why = "inconclusive", ("no deterministic capacity to hold the sizes against" if ratio is None
                                            else "no set diversity (fewer than two seeds)")
        elif ratio < mix["size_tolerance"]:
            outcome, why = "fails", f"size / capacity {ratio:.3g} below {mix['size_tolerance']:g}"
        else:
            outcome, why = "fails", f"set diversity {diversity:.3g} below {mix['diversity_bound']:g}"
        claims.append(Claim(f"{name} mixes strategies (per-seed stored sets near capacity, different across seeds; "
                            "value: set diversity)", diversity, None if other is None else other["set_diversity"],
                            runs[1]["name"] if other is not None else "no compared run", Verdict(outcome, rule, why)))
    codes = [r.get("codes", {}) for r in runs[:2]]
    if len(runs) > 1 and all("failure_rate" in c for c in codes):
        from circuits.analyses.recall_codes import code_claims

        claims += code_claims(codes[0], codes[1], name, runs[1]["name"])
    use = first.get("noise_use")
    if use is not None and len(runs) > 1:
        # the toolkit's bar for "the model does X" (agreement, IIA): 0.9; the rate elsewhere is shown beside it
        claims.append(meets(f"where {runs[1]['name']} is in conflict, {name}'s noise decides the colour (share of "
                            "those vertices)", use["decided_where_conflict"], 0.9, side="at least",
                            control=use["decided_elsewhere"], control_label="the same share elsewhere",
                            value_name="share"))
    rule = first.get("mechanism", {}).get("rule")
    if rule is not None:
        claims.append(exceeds(f"{name}'s colouring agrees with the classical routine (relabelled) beyond shuffled noise",
                              rule["agreement"], rule["agreement_shuffled"], control_label="shuffled-noise control"))
    return claims


# ------------------------------------------------------------------ the report


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


@dataclass(repr=False)
class RandomnessReport(Displayed):
    """Attributes:
    runs: one JSON-ready dict per analysed run (:func:`analyse_run`), in the order given.
    rows: per run its key numbers (:func:`key_numbers`), what the CLI prints; ``summary`` has
        them by run name.
    """

    runs: list[dict[str, Any]]
    rows: list[dict[str, Any]]

    @property
    def summary(self) -> dict[str, dict[str, Any]]:
        return {r["name"]: row for r, row in zip(self.runs, self.rows)}

    @property
    def claims(self) -> list[Any]:
        """:func:`randomness_claims` of the runs."""
        return randomness_claims(self.runs)

    def finding(self) -> str | None:
        """What the first run learned, in one sentence of its numbers (``None`` without the
        success-based measure): how often its seed decides its success against the compared run
        and the random-init control; recall: its key codes as a random hash; colouring: where its
        noise decides."""
        first = self.runs[0]
        if "decides" not in first:
            return None
        second = self.runs[1] if len(self.runs) > 1 else None
        other = f"; {second['name']}: {second['decides']['decides']:.3f}" if second and "decides" in second else ""
        text = (f"{first['name']}'s seed decides its success (right under one seed, wrong under another) on "
                f"{first['decides']['decides']:.3f} of seed pairs (random init: "
                f"{first['random_init']['decides']['decides']:.3f}{other})")
        codes, twin = first.get("codes", {}), (second or {}).get("codes", {})
        if "failure_rate" in codes and "failure_rate" in twin:
            text += (f"; it uses the seed as a random hash of its key codes: {codes['collide_every_seed']:.2f} of its "
                     f"key collisions hold under every seed ({second['name']}: {twin['collide_every_seed']:.2f}), and "
                     f"the input an oblivious adversary picks still succeeds under {1 - codes['oblivious_adversary']:.0%} "
                     f"of seeds ({second['name']}: {1 - twin['oblivious_adversary']:.0%})")
            moved, twin_moved = codes["details"].get("transplant_any"), twin["details"].get("transplant_any")
            if moved and twin_moved and moved["n_cases"]:
                text += (f"; another seed rescues {moved['whole_seed']:.2f} of its failing recalls, that seed's query "
                         f"and key codes alone {moved['all_codes']:.2f}, its values alone {moved['values']:.2f} "
                         f"({second['name']}: {twin_moved['whole_seed']:.2f}, {twin_moved['all_codes']:.2f}, "
                         f"{twin_moved['values']:.2f})")
        use = first.get("noise_use")
        if use is not None and second is not None:
            text += (f"; its noise decides {use['decided']:.2f} of vertices, {use['decided_where_conflict']:.2f} of "
                     f"those where {second['name']} colours a vertex like its neighbour")
        return text

    def algorithm(self) -> str | None:
        """The algorithm the claims test, as pseudocode naming its components: recall's key
        codes as a random hash (:data:`circuits.analyses.recall_codes.PSEUDOCODE`) where the
        first run has its code study; ``None`` otherwise."""
        if "failure_rate" not in self.runs[0].get("codes", {}):
            return None
        from circuits.analyses.recall_codes import PSEUDOCODE

        return PSEUDOCODE

    def to_dict(self) -> dict[str, Any]:
        """``{"runs": [...], "summary": {...}, "claims": [...], "finding": ..., "algorithm": ...}``:
        randomness.json, and what the drawing and the demo index read."""
        return {"runs": self.runs, "summary": self.summary, "claims": [c.to_dict() for c in self.claims],
                "finding": self.finding(), "algorithm": self.algorithm()}

    FILES = ("randomness.json", "randomness.html")  # what write() writes, together

    def to_json(self) -> str:
        return json_text(self.to_dict(), indent=1)

    def headline(self) -> str:
        """What the first run learned (:meth:`finding`), or the claims' verdict count."""
        from interp_rand.verdicts import summary_line

        return self.finding() or summary_line(self.claims)

    def text(self) -> str:
        """The key numbers as a table, one row each, one column per run."""
        rows = self.rows
        names = [r["name"] for r in self.runs]
        width = max(len(k) for k in rows[0])
        lines = [f"{'':{width}}  " + "  ".join(f"{n[:28]:>28}" for n in names)]
        lines += [f"{key:{width}}  " + "  ".join(f"{_fmt(row.get(key)):>28}" for row in rows) for key in rows[0]]
        from interp_rand.verdicts import summary_line

        claims = self.claims
        algorithm = self.algorithm()
        lead = ["the algorithm the claims test:", algorithm, ""] if algorithm else []
        return "\n".join(lead + lines + [c.line() for c in claims] + [summary_line(claims)])

    def figure(self) -> Any:
        """The seed usage of every run beside the random-init control as a plotly figure (the
        page's first figure), for a notebook."""
        from circuits.draw.randomness_figure import usage_figure

        return usage_figure(self.runs)

    def write(self, out: str | Path) -> tuple[Path, Path]:
        """randomness.json and randomness.html in ``out``; returns their paths."""
        from circuits.draw.randomness_figure import write_randomness_html
        from interp_rand.output import replace_files, write_text

        out = Path(out)
        with replace_files(out, self.FILES) as stage:
            write_text(stage / "randomness.json", self.to_json())
            write_randomness_html(self, stage / "randomness.html")
        return out / "randomness.json", out / "randomness.html"


def randomness_report(run: str | Path | None = None, compare: str | Path | None = None, *, model: Any = None,
                      task: Any = None, seed_source: str = "fresh", compare_model: Any = None,
                      compare_seed_source: str = "fresh", n: int = 2048, stored_inputs: int = 32,
                      seed: int = DEFAULT_SEED, progress: bool = False) -> RandomnessReport:
    """The randomness report of ``run`` (a run folder or ``zoo:NAME``), side by side with
    ``compare`` (a second run of the same task, e.g. the ERM twin) if given; both runs are
    checked before either is analysed. ``n``: examples for the usage score and probes;
    ``stored_inputs``: recall's key/value inputs of the stored-set map; ``seed``: of the draws.

    A model of your own: ``model`` and its ``task`` in place of ``run`` and ``compare_model`` in
    place of ``compare`` (the same task), ``seed_source``/``compare_seed_source="fixed"`` for a
    model trained on the task's r0 alone."""
    from interp_rand.reports.randomness_mechanism import compare_capacity
    from interp_rand.tasks.spec import require_task

    if (run is None) == (model is None):
        raise ValueError("randomness_report takes a run or a model (with its task), not "
                         + ("both" if run is not None else "neither"))
    if compare is not None and compare_model is not None:
        raise ValueError("randomness_report: give compare (a run) or compare_model, not both")
    entries: list = []  # (label, run or None, model or None, seed_source)
    if run is not None:
        first_task = load_seeded(run).spec.task_name
        entries.append((str(run), run, None, None))
    else:
        require_task(task, "randomness_report")
        _check_seeded(model, task, "model")
        first_task = task.name
        entries.append(("model", None, model, seed_source))
    if compare is not None:
        second = load_seeded(compare)
        if second.spec.task_name != first_task:
            raise ValueError(f"--compare: {compare} is a {second.spec.task_name!r} run, not {first_task!r}")
        entries.append((str(compare), compare, None, None))
    if compare_model is not None:
        if run is not None:
            raise ValueError("randomness_report: compare_model is compared with model= (its task is task=)")
        _check_seeded(compare_model, task, "compare_model")
        entries.append(("compare_model", None, compare_model, compare_seed_source))
    runs = []
    for label, path, given, source in entries:
        if path is not None:
            runs.append(analyse_run(path, n, stored_inputs, seed, progress=progress))
        else:
            head = {"name": label, "run": None, "task": task.name, "step": None, "objective": None, "q": None,
                    "seed_source": source}
            runs.append({**head, **analyse_model(given.eval(), task, seed_source=source, n=n,
                                                 stored_inputs=stored_inputs, seed=seed, label=label,
                                                 progress=progress)})
    if len(runs) == 2:
        compare_capacity(runs)  # the first run's per-seed sets against the second's capacity
        if first_task in RANDOMNESS_PAIR_ANALYSES:  # the task's own analysis of the two models together
            first, second, made = _pair_models(entries, task)
            RANDOMNESS_PAIR_ANALYSES.get(first_task)(first, second, made, runs[0], seed=seed, progress=progress)
    return RandomnessReport(runs, [key_numbers(r) for r in runs])


def _pair_models(entries: list, task: Any) -> tuple[Any, Any, Any]:
    """The two entries' models (a run's loaded, a given one as is) and their task."""
    models = []
    for _, path, given, _ in entries[:2]:
        if path is not None:
            ckpt = load_seeded(path)
            models.append(ckpt.model().eval())
            task = ckpt.spec.make_task()
        else:
            models.append(given.eval())
    return models[0], models[1], task


@register_randomness_pair_analysis("coloring")
def _noise_use(first: Any, second: Any, task: Any, out: dict[str, Any], *, seed: int, progress: bool) -> None:
    """Where the first model's noise decides against where the second (its ERM twin) is in
    conflict (:func:`~interp_rand.seeded_evaluation.noise_use.noise_use`), per id class of the
    colouring rule, into the first run's ``noise_use``."""
    from interp_rand.reports.mechanisms.coloring_seed import CLASS_NAMES, ID_CLASS
    from interp_rand.seeded_evaluation.noise_use import noise_use

    _progress.note(f"where the noise decides ({NOISE_USE_CYCLES} cycles x {NOISE_USE_DRAWS} noise draws)", progress)
    classes = ID_CLASS if task.n_vertices == len(ID_CLASS) else None
    out["noise_use"] = noise_use(first, second, task, n_cycles=NOISE_USE_CYCLES, n_noise=NOISE_USE_DRAWS, seed=seed,
                                 classes=classes, class_names=CLASS_NAMES if classes is not None else ()).to_dict()


def _check_seeded(model: Any, task: Any, what: str) -> None:
    if not getattr(getattr(model, "cfg", None), "has_seed", False) or not hasattr(task, "sample_seeds"):
        raise ValueError(f"randomness_report: {what}: task {task.name!r} / this model has no seed channel")


__all__ = ["DEFAULT_SEED", "RandomnessReport", "analyse_model", "analyse_run", "key_numbers", "load_seeded",
           "randomness_claims", "randomness_report", "register_randomness_analysis", "register_randomness_pair_analysis",
           "RANDOMNESS_ANALYSES", "RANDOMNESS_PAIR_ANALYSES"]
