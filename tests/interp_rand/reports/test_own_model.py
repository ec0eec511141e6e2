"""Every report takes a model and a task (a registered one or a TaskSpec), not only a run folder;
a missing task is refused in one line naming what is needed; ``--model module:function`` works
on the commands."""

import sys
import types

import pytest
import torch

from interp_rand.cli.main import main
from interp_rand.model import HookedTransformer, ModelConfig
from interp_rand.reports.circuit import circuit_report
from interp_rand.reports.evaluation import evaluation_report
from interp_rand.reports.randomness import randomness_report
from interp_rand.tasks import Batch, PairBatch, TaskSpec
from probes import ProbeConfig, probe_task
from probes.report import ReportConfig, build_report
from probes.variables import VariableLabels

L, V = 4, 5


def _sample(n, generator):
    x = torch.randint(0, V, (n, L), generator=generator)
    return Batch(x, x.cummax(1).values, torch.ones(n, L, dtype=torch.bool), torch.arange(L))


def _corrupt(batch, generator):
    x = batch.inputs.clone()
    x[:, 0] = (x[:, 0] + 1) % V
    return PairBatch(batch, Batch(x, x.cummax(1).values, batch.loss_mask, batch.answer_positions), torch.zeros(len(x)))


SPEC = TaskSpec("running-max", _sample, [f"x{i}" for i in range(L)], _corrupt,
                variables={"first": lambda task, batch, model: VariableLabels(batch.inputs[:, :1], V, ("x0",),
                                                                              batch.inputs[:, :1])})


@pytest.fixture(scope="module")
def model():
    return HookedTransformer(ModelConfig(d_model=16, n_heads=2, n_layers=1, n_ctx=L, d_vocab=V), seed=0).eval()


def test_task_none_is_refused_in_one_line(model):
    batch = _sample(8, torch.Generator().manual_seed(0))
    for call, name in ((lambda: build_report(model, None), "build_report"),
                       (lambda: probe_task(model, None, batch), "probe_task"),
                       (lambda: circuit_report(model=model), "circuit_report"),
                       (lambda: evaluation_report(model=model), "evaluation_report"),
                       (lambda: randomness_report(model=model), "randomness_report")):
        with pytest.raises(ValueError, match=rf"^{name} needs a task: .*TaskSpec\(name, sample_fn=") as err:
            call()
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="takes a run or a model"):
        circuit_report("zoo:sort", model=model, task=SPEC)
    with pytest.raises(ValueError, match="has no corruption; circuits need TaskSpec"):
        circuit_report(model=model, task=TaskSpec("x", _sample, SPEC.positions), card=False, n=8)


def test_reports_on_a_model_and_a_taskspec(model):
    found = circuit_report(model=model, task=SPEC, n=16, top_k=10, card=False, n_resamples=1)
    assert found.circuit.settings["task"] == "running-max" and 0 < len(found.circuit) <= 10  # connected: dangling edges dropped
    assert found.position_names == ["x0", "x1", "x2", "x3"] and found.title.startswith("model (running-max)")
    data = build_report(model, SPEC, ReportConfig(n_examples=32, n_probe_examples=64))
    assert data.position_names == ("x0", "x1", "x2", "x3") and data.probe_rows[0]["variable"] == "first"
    probe = probe_task(model, SPEC, _sample(64, torch.Generator().manual_seed(1)), ProbeConfig(causal=False))[0]
    assert probe.variable == "first" and probe.random_accuracy is not None  # with its random-init control
    with pytest.raises(ValueError, match="provides no probe variable 'nope'; it provides: first"):
        probe_task(model, SPEC, _sample(8, torch.Generator()), ProbeConfig(variables=("nope",)))
    report = evaluation_report(model=model, task=SPEC, n=64)
    assert report.result["task"] == "running-max" and report.result["checkpoint"] == "model" and report.run_dir is None


def test_randomness_report_with_compare_model_and_the_fixed_seed_note():
    from interp_rand.tasks import make_task

    task = make_task("recall", n_pairs=3, seed_bits=3)  # 8 seeds: the all-seed analyses are cheap
    a, b = (HookedTransformer(task.model_config(d_model=8), seed=s) for s in (0, 1))
    report = randomness_report(model=a, task=task, compare_model=b, compare_seed_source="fixed", n=64,
                               stored_inputs=2)
    names = [r["name"] for r in report.runs]
    assert names == ["model", "compare_model"]
    rows = report.summary
    assert rows["model"]["seeds in training"] == "fresh seeds"
    assert rows["compare_model"]["seeds in training"].startswith("r0 only: the usage score's fresh seeds are outside")
    assert "seeds in training" in report.text()
    # the claims and the page's headline are made where the mixing numbers are missing, too
    # (an untrained model: capacity 0, so no size ratio), as inconclusive with the reason
    from circuits.draw.randomness_figure import randomness_headline

    mix = report.runs[0]["mechanism"]["mixing"]
    mixing_claim = report.to_dict()["claims"][2]
    assert mix["size_ratio"] is None
    assert mixing_claim["verdict"] == "inconclusive" and "capacity" in mixing_claim["reason"]
    assert randomness_headline(report).verdict in ("holds", "fails", "inconclusive")


def test_cli_model_option(tmp_path, capsys, monkeypatch, model):
    module = types.ModuleType("byom_cli_models")
    module.build = lambda: (model, SPEC)
    module.bad = lambda: model
    monkeypatch.setitem(sys.modules, "byom_cli_models", module)
    assert main(["--threads", "1", "eval", "--model", "byom_cli_models:build", "--n", "32", "--out", str(tmp_path)]) == 0
    assert '"task": "running-max"' in capsys.readouterr().out
    assert main(["--threads", "1", "circuit", "--model", "byom_cli_models:build", "--n", "8", "--top-k", "5",
                 "--no-card", "--resamples", "1", "--out", str(tmp_path / "c")]) == 0
    assert (tmp_path / "c" / "circuit.html").exists()
    capsys.readouterr()
    assert main(["--threads", "1", "eval", "--model", "byom_cli_models:bad", "--out", str(tmp_path)]) == 2
    assert "must return (model, task)" in capsys.readouterr().err
    assert main(["--threads", "1", "eval", "zoo:sort", "--model", "byom_cli_models:build"]) == 2
    assert "give RUN_DIR or --model MODULE:FUNCTION, not both" in capsys.readouterr().err
