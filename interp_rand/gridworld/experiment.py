"""The grid-world experiment: train a variant, save and evaluate it, and compare ERM with the
randomized agent (m seeds, and m = 1) beside the paper's values."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from interp_rand.gridworld.checkpoint import load_agent, save_agent
from interp_rand.gridworld.config import GridworldScale
from interp_rand.gridworld.evaluation import AgentEvaluation, evaluate_agent, save_json
from interp_rand.gridworld.pgpe import train_agent
from interp_rand.output.lock import run_lock
from interp_rand.run_names import output_folder
from interp_rand.variant_names import file_label

# Evaluation seeds come from their own generator seed, apart from the training seeds.
EVAL_SEED = 12_345
EVALUATION_FILE = "evaluation.json"
LABELS = {"erm": "A^E_R", "worst": "A^q_R"}
# The paper, Task 3 (read off the paper's plots): worst-5% accumulated reward; the averages of
# ERM and the randomized agent are "within 1-2" of each other; m = 1 "fails"; the paper gives
# no absolute averages and no number for m = 1.
PAPER_VALUES = {
    "A^E_R": {"worst_5pct": -39.0, "note": "follows one route"},
    "A^q_R": {"worst_5pct": -27.0, "note": "average within 1-2 of ERM; near-uniform first-visit map"},
    "A^q_R (m=1)": {"worst_5pct": None, "note": "fails (no better than ERM)"},
}


def variant_label(scale: GridworldScale, m_reference: int | None = None) -> str:
    label = LABELS[scale.pgpe.variant]
    if scale.pgpe.variant == "worst" and scale.pgpe.m_seeds == 1 and m_reference not in (None, 1):
        label += " (m=1)"
    return label


def evaluate_run(path: str | Path, n_seeds: int | None = None, seed: int = EVAL_SEED,
                 out: str | Path | None = None) -> dict[str, Any]:
    """Evaluate a saved agent (run directory, checkpoint folder or ``zoo:NAME``) and write
    ``evaluation.json`` into ``out`` (default: the run directory; ``zoo-output/NAME`` for a zoo
    agent, see :func:`~interp_rand.run_names.output_folder`); returns the summary, whose
    ``folder`` is where it was written (:func:`evaluate_saved` also gives the evaluation)."""
    return evaluate_saved(path, n_seeds, seed, out)[0]


def evaluate_saved(path: str | Path, n_seeds: int | None = None, seed: int = EVAL_SEED,
                   out: str | Path | None = None) -> tuple[dict[str, Any], AgentEvaluation]:
    """:func:`evaluate_run`'s summary and the :class:`AgentEvaluation` it summarises."""
    ckpt = load_agent(path)
    n = n_seeds or ckpt.scale.pgpe.eval_seeds
    evaluation = evaluate_agent(ckpt.model(), ckpt.scale.grid, n, seed=seed)
    folder = output_folder(path, ckpt.path.parent.parent, out)
    summary = {"scale": ckpt.scale.to_dict(), "checkpoint": str(ckpt.path), "folder": str(folder), "eval_seed": seed,
               **evaluation.summary()}
    save_json(summary, folder / EVALUATION_FILE)
    return summary, evaluation


def run_variant(scale: GridworldScale, out: str | Path, num_actors: int | str | None = None,
                on_log: Callable[[dict[str, Any]], None] | None = None, device: str = "cpu") -> dict[str, Any]:
    """Train one agent at ``scale`` (on ``device``), save it under ``out`` and evaluate it,
    holding ``out``'s run lock throughout (:class:`~interp_rand.output.lock.RunLocked`
    if another process writes it)."""
    with run_lock(out):
        trained = train_agent(scale, num_actors=num_actors, on_log=on_log, device=device)
        save_agent(Path(out), scale, trained)
        save_json(trained.history, Path(out) / "history.json")
        return evaluate_run(out)


def compared_variants(scale: GridworldScale) -> list[GridworldScale]:
    """ERM, the worst-cell agent with ``scale.pgpe.m_seeds`` seeds and (if that is not 1) with
    m = 1: the agents :func:`compare` trains."""
    variants = [scale.replace(variant="erm"), scale.replace(variant="worst")]
    if scale.pgpe.m_seeds != 1:
        variants.append(scale.replace(variant="worst", m_seeds=1))
    return variants


def compare(scale: GridworldScale, out: str | Path, num_actors: int | str | None = None,
            on_log: Callable[[str, dict[str, Any]], None] | None = None, device: str = "cpu") -> list[dict[str, Any]]:
    """Train and evaluate ERM, the randomized agent with ``scale.pgpe.m_seeds`` seeds and the
    randomized agent with m = 1; write ``comparison.json``; return one row per variant."""
    rows = []
    for variant in compared_variants(scale):
        label = variant_label(variant, scale.pgpe.m_seeds)
        folder = Path(out) / file_label(label)
        summary = run_variant(variant, folder, num_actors=num_actors, device=device,
                              on_log=None if on_log is None else (lambda e, lab=label: on_log(lab, e)))
        rows.append({"variant": label, "m": variant.pgpe.m_seeds, "run_dir": str(folder),
                     "tie_break_q": variant.pgpe.tie_break_q if variant.pgpe.variant == "worst" else None,
                     **{k: summary[k] for k in ("average", "worst_5pct", "worst_cell", "worst_5pct_pooled",
                                                "seed_std", "first_visit_max", "first_visit_min",
                                                "n_distinct_routes", "first_visit_map")},
                     "paper": PAPER_VALUES.get(label, {})})
    save_json({"scale": scale.to_dict(), "rows": rows}, Path(out) / "comparison.json")
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """A markdown table of ``compare``'s rows with the paper's values beside ours."""
    lines = ["| variant | m | average | worst-5% | worst cell | paper worst-5% | first visit max / min | distinct routes |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        paper = r["paper"].get("worst_5pct")
        paper_text = "—" if paper is None else f"≈ {paper:g}"
        if r["paper"].get("note"):
            paper_text += f" ({r['paper']['note']})"
        lines.append(f"| {r['variant']} | {r['m']} | {r['average']:.2f} | {r['worst_5pct']:.2f} | "
                     f"{r['worst_cell']:.2f} | {paper_text} | {r['first_visit_max']:.2f} / "
                     f"{r['first_visit_min']:.2f} | {r['n_distinct_routes']} |")
    return "\n".join(lines)


__all__ = ["EVAL_SEED", "PAPER_VALUES", "compare", "evaluate_run", "evaluate_saved", "run_variant", "table"]
