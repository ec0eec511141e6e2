"""The mechanism lines of ``interp-rand randomness`` on tiny saved runs."""

from __future__ import annotations

import json

import torch

from interp_rand.cli.main import main
from interp_rand.model.transformer import HookedTransformer
from interp_rand.tasks.coloring import ColoringTask
from interp_rand.tasks.recall import RecallTask
from interp_rand.training.checkpoint import RunSpec, save_checkpoint
from interp_rand.training.config import TrainConfig


def save(path, task, model, **train):
    spec = RunSpec(task.name, task.config_dict(), model.cfg, TrainConfig(**train))
    save_checkpoint(path, 1, spec, model.state_dict(), {}, {}, keep=1)
    return str(path)


def test_recall_lines_judge_against_the_compare_runs_capacity(tmp_path, capsys):
    task = RecallTask(n_pairs=4, value_bits=2, seed_bits=3)
    seeded = HookedTransformer(task.model_config(d_model=16, init_range=1.0), seed=1).eval()
    blind = HookedTransformer(task.model_config(d_model=16, init_range=1.0), seed=2).eval()
    with torch.no_grad():
        blind.seed_embed.W_seed.zero_()
    runs = [save(tmp_path / "seeded", task, seeded), save(tmp_path / "blind", task, blind, seed_source="fixed")]
    out = tmp_path / "out"
    assert main(["randomness", runs[0], "--compare", runs[1], "--out", str(out), "--n", "64", "--stored-inputs", "4"]) == 0
    stdout = capsys.readouterr().out
    assert "per seed: Jaccard of two seeds' sets" in stdout and "strongest bit acts via query token" in stdout
    first, second = json.loads((out / "randomness.json").read_text())["runs"]
    mix = first["mechanism"]["mixing"]
    assert mix["capacity_source"] == "blind" and mix["capacity"] == second["mechanism"]["deterministic_capacity"]
    assert mix["mean_size"] == first["stored_set"]["mean_size"]
    # the seed-blind run stores one set under every seed, and no bit changes it
    assert second["mechanism"]["mixing"]["mean_jaccard"] == 1.0 and second["mechanism"]["bit_flip"]["max_effect"] == 0
    assert second["mechanism"]["deterministic_capacity_seeds"] == "fixed seed r0"
    assert first["mechanism"]["bit_flip"]["max_effect"] > 0
    assert first["mechanism"]["routes"]["recovered"][0]["input_mlp"] == 1.0


def test_coloring_lines(tmp_path, capsys):
    task = ColoringTask(n_vertices=6)
    model = HookedTransformer(task.model_config(), seed=0).eval()
    out = tmp_path / "out"
    assert main(["randomness", save(tmp_path / "run", task, model), "--out", str(out), "--n", "64"]) == 0
    assert "rule: agreement with classical (relabelled)" in capsys.readouterr().out
    rule = json.loads((out / "randomness.json").read_text())["runs"][0]["mechanism"]["rule"]
    assert 0 < rule["classical_success"] < 1 and 0 <= rule["agreement"] <= 1
