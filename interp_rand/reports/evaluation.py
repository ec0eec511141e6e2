"""The evaluation of a trained run in one call (what ``interp-rand eval`` prints and writes):
fresh examples of its task, and for a seeded task with ``seeds`` also the paper's metrics
over that many seeds per input (:func:`interp_rand.seeded_evaluation.evaluate_seeded`).

    >>> report = evaluation_report("zoo:recall-Aq_R", n=10_000, seeds=100)
    >>> report.result["exact_match"], report.seeded["worst_5pct"]
    >>> report.write("out/recall")   # eval.json and seeded_eval.json
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_rand import progress as _progress
from interp_rand.display import Displayed, bars_svg
from interp_rand.reports.inputs import analysis_inputs

EVAL_FILE, SEEDED_FILE = "eval.json", "seeded_eval.json"

from interp_rand.defaults import DEFAULT_SEED as DEFAULT_EVAL_SEED
# the seeded metrics the CLI prints
SEEDED_KEY_NUMBERS = ("n_inputs", "n_seeds", "average", "worst_5pct", "predictive_variance")


def seeded_task_names() -> list[str]:
    """The registered tasks with a seed channel."""
    from interp_rand.tasks import task_class, task_names

    return [name for name in task_names() if hasattr(task_class(name), "sample_seeds")]


@dataclass(repr=False)
class EvaluationReport(Displayed):
    """In a notebook: the headline (exact match, and the seeded metrics), the accuracy per
    answer position as bars; :meth:`figure` draws them (and the seeded per-input histogram).

    Attributes:
    result: what eval.json holds (checkpoint, step, task, eval seed, the evaluation figures).
    seeded: what seeded_eval.json holds (None without ``seeds``).
    run_dir: the run's folder (where results go by default; ``None`` for a model given directly).
    """

    result: dict[str, Any]
    seeded: dict[str, Any] | None
    run_dir: Path | None

    def key_numbers(self) -> dict[str, Any]:
        return {k: v for k, v in self.result.items() if k != "breakdown"}

    def seeded_key_numbers(self) -> dict[str, Any]:
        return {k: self.seeded[k] for k in SEEDED_KEY_NUMBERS}

    def headline(self) -> str:
        """One line: the run, exact match on the fresh examples, and with seeds the average and
        the worst 5% over seeds."""
        r = self.result
        where = Path(str(r.get("checkpoint", ""))).parent.parent.name or "the model"
        step = "" if r.get("step") is None else f", step {r['step']}"
        line = f"{r['task']} ({where}{step}): exact match {r['exact_match']:.4f} on {r['n_examples']} fresh examples"
        if self.seeded is not None:
            s = self.seeded
            line += (f"; over {s['n_seeds']} seeds per input: average {s['average']:.4f}, "
                     f"worst 5% {s['worst_5pct']:.4f}")
        return line

    def lines(self) -> list[str]:
        """What the command prints: the key numbers, then the seeded key numbers."""
        out = [self.headline()]
        out += [f"{k}: {v}" for k, v in self.key_numbers().items() if k != "per_position"]
        out.append("per answer position: " + ", ".join(f"{a:.4f}" for a in self.result["per_position"]))
        if self.seeded is not None:
            out += [f"seeded {k}: {v}" for k, v in self.seeded_key_numbers().items()]
        return out

    def small_figure(self) -> str | None:
        """The accuracy per answer position as bars (and the seeded average and worst 5%)."""
        rows = [(f"answer position {k}", a) for k, a in enumerate(self.result["per_position"])]
        if self.seeded is not None:
            rows += [("over seeds: average", self.seeded["average"]), ("over seeds: worst 5%", self.seeded["worst_5pct"])]
        return bars_svg(rows, lo=0.0, hi=1.0, caption="accuracy per answer position")

    def figure(self) -> Any:
        """A plotly figure: the accuracy per answer position, and with seeds the histogram of
        each input's success rate over its seeds."""
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        per_position = self.result["per_position"]
        histogram = (self.seeded or {}).get("histogram")
        fig = make_subplots(rows=1, cols=2 if histogram else 1, subplot_titles=(
            "accuracy per answer position", *(("inputs by success rate over seeds",) if histogram else ())))
        fig.add_trace(go.Bar(x=list(range(len(per_position))), y=per_position, name="accuracy",
                             marker_color="#4c78a8"), row=1, col=1)
        fig.update_yaxes(range=[0, 1], title_text="accuracy", row=1, col=1)
        fig.update_xaxes(title_text="answer position", dtick=1, row=1, col=1)
        if histogram:
            edges = histogram["edges"]
            centres = [(a + b) / 2 for a, b in zip(edges[:-1], edges[1:])]
            fig.add_trace(go.Bar(x=centres, y=histogram["counts"], name="inputs", marker_color="#72b7b2",
                                 width=[b - a for a, b in zip(edges[:-1], edges[1:])]), row=1, col=2)
            fig.update_xaxes(title_text="success rate over seeds", range=[0, 1], row=1, col=2)
            fig.update_yaxes(title_text="inputs", row=1, col=2)
        fig.update_layout(title=self.headline(), showlegend=False, height=360, template="plotly_white",
                          title_font_size=13)
        return fig

    def write(self, out: str | Path) -> tuple[Path, Path | None]:
        """eval.json (and seeded_eval.json) in ``out``, replaced together; returns their paths."""
        from interp_rand.output import replace_files, write_json

        out = Path(out)
        with replace_files(out, self.files()) as stage:
            write_json(stage / EVAL_FILE, self.result)
            if self.seeded is not None:
                write_json(stage / SEEDED_FILE, self.seeded)
        return out / EVAL_FILE, None if self.seeded is None else out / SEEDED_FILE

    def files(self) -> tuple[str, ...]:
        """The files :meth:`write` writes."""
        return (EVAL_FILE,) + (() if self.seeded is None else (SEEDED_FILE,))


def evaluation_report(run: str | Path | None = None, *, model: Any = None, task: Any = None,
                      seed_source: str = "fresh", n: int = 10_000, seed: int = DEFAULT_EVAL_SEED,
                      seeds: int | None = None, progress: bool = False) -> EvaluationReport:
    """Evaluate ``run``'s newest checkpoint on ``n`` fresh examples drawn with ``seed`` (a model
    trained on the fixed seed r0 on r0, as in training); ``task``: with a run, the expected task
    name (an error otherwise); ``seeds``: also run every example under that many random seeds (a
    fixed-seed run: its r0, refused in one line when r0 is not known) for the paper's metrics,
    refused before any work for a task without a seed channel. ``model`` and ``task`` (a task or
    a :class:`~interp_rand.tasks.spec.TaskSpec`) in place of ``run``: a model of your own
    (``seed_source="fixed"``: trained on the task's r0 alone)."""
    import torch

    from interp_rand.evaluation import evaluate
    from interp_rand.seeded_evaluation import evaluate_seeded

    expected = task if run is not None else None
    inputs = analysis_inputs(run, n, seed, pairs=None, model=model, task=None if run is not None else task,
                             seed_source=seed_source, what="evaluation_report", expected_task=expected)
    ckpt, batch = inputs.ckpt, inputs.batch
    if seeds is not None and not hasattr(inputs.task, "sample_seeds"):  # before any evaluation
        raise ValueError(f"--seeds: task {inputs.task.name!r} has no seed channel; --seeds is for the randomized "
                         f"tasks ({', '.join(seeded_task_names())})")
    fixed = (ckpt.spec.train_config.seed_source if ckpt is not None else seed_source) == "fixed"
    if fixed and seeds is not None:
        inputs.task.fixed_seed()  # a fixed-seed model whose r0 is not known: refused before any work
    result = evaluate(inputs.model, inputs.task, batch, progress=progress)
    where = {"checkpoint": inputs.source, "step": ckpt.step if ckpt is not None else None}
    report = {**where, "task": inputs.task.name, "eval_seed": seed, **result.to_dict()}
    seeded = None
    if seeds is not None:
        with _progress.stage(f"{len(batch)} inputs x {1 if fixed else seeds} seeds", progress):
            summary = evaluate_seeded(inputs.task, inputs.model, batch, seeds, torch.Generator().manual_seed(seed),
                                      fixed=fixed)
        seeded = {**where, "eval_seed": seed, **summary}
    return EvaluationReport(report, seeded, ckpt.path.parent.parent if ckpt is not None else None)


__all__ = ["DEFAULT_EVAL_SEED", "EvaluationReport", "evaluation_report", "seeded_task_names"]
