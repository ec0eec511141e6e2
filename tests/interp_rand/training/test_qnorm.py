"""The q-norm objective of the paper: q = 1 is the mean, large q approaches the max, the m seeds
are shared by every input of the batch, and bad settings are refused."""

import dataclasses

import pytest
import torch

from interp_rand.model import HookedTransformer
from interp_rand.tasks import make_task
from interp_rand.training import TrainConfig, make_objective, q_norm, train
from interp_rand.training.qnorm import QNorm


def test_q_one_is_the_mean():
    losses = torch.tensor([0.5, 1.0, 2.5, 4.0])
    assert torch.allclose(q_norm(losses, 1.0), losses.mean())


def test_large_q_approaches_the_max_from_below():
    losses = torch.tensor([0.1, 0.2, 3.0, 0.4])
    values = [q_norm(losses, q).item() for q in (1.0, 4.0, 16.0, 100.0, 1000.0)]
    assert values == sorted(values)  # monotone in q
    assert values[-1] <= 3.0 and values[-1] == pytest.approx(3.0, rel=2e-3)
    assert q_norm(losses, float("inf")).item() == 3.0


def test_stable_form_equals_the_naive_form_and_survives_huge_q():
    losses = torch.tensor([0.3, 0.7, 1.1], dtype=torch.float64)
    naive = losses.pow(5).mean().pow(1 / 5)
    assert torch.allclose(q_norm(losses, 5.0), naive)
    assert torch.isfinite(q_norm(torch.tensor([50.0, 60.0]), 400.0))  # 60**400 overflows naively
    assert q_norm(torch.zeros(3), 10.0).item() == 0.0


def test_gradient_concentrates_on_the_worst_input_for_large_q():
    losses = torch.tensor([0.2, 0.4, 1.0], requires_grad=True)
    q_norm(losses, 50.0).backward()
    assert losses.grad.argmax().item() == 2
    assert losses.grad[2] > 10 * losses.grad[:2].sum()


class _SeedEcho(torch.nn.Module):
    """Records the seeds it is given; its 'logits' make the loss depend on the seed."""

    def __init__(self):
        super().__init__()
        self.seen = []
        self.scale = torch.nn.Parameter(torch.ones(()))

    def forward(self, inputs, seeds=None, attention_mask=None):
        self.seen.append(seeds.clone())
        n, pos = inputs.shape[:2]
        return (self.scale * seeds.sum(-1, keepdim=True)[:, None].expand(n, pos, 5))


def test_m_seeds_are_shared_by_every_input_and_redrawn_each_step():
    task = make_task("recall", n_pairs=4)
    objective = make_objective(TrainConfig(objective="qnorm", q=4.0, m_seeds=3))
    model = _SeedEcho()
    generator = torch.Generator().manual_seed(0)
    batch = task.sample(5, generator)
    objective(model, task, batch, generator)
    seen = model.seen[-1].view(5, 3, -1)  # rows are input-major: input i, seed j
    assert all(torch.equal(seen[i], seen[0]) for i in range(5))
    assert not torch.equal(seen[0, 0], seen[0, 1])  # m distinct draws
    objective(model, task, batch, generator)
    assert not torch.equal(model.seen[-1].view(5, 3, -1)[0], seen[0])  # redrawn next step


def test_fixed_seed_source_uses_r0_only():
    task = make_task("recall", n_pairs=4)
    model = _SeedEcho()
    generator = torch.Generator().manual_seed(0)
    batch = task.sample(4, generator)
    make_objective(TrainConfig(objective="qnorm", q=4.0, m_seeds=3, seed_source="fixed"))(model, task, batch, generator)
    make_objective(TrainConfig(objective="erm", seed_source="fixed"))(model, task, batch, generator)
    r0 = task.fixed_seed()
    for seen in model.seen:
        assert torch.equal(seen, r0.expand_as(seen))


def test_qnorm_objective_equals_hand_computation_on_a_real_model():
    task = make_task("recall", n_pairs=4)
    model = HookedTransformer(task.model_config(d_model=16), seed=0)
    objective = QNorm(TrainConfig(objective="qnorm", q=3.0, m_seeds=2))
    generator = torch.Generator().manual_seed(1)
    batch = task.sample(6, generator)
    seeds = objective.seeds(task, torch.Generator().manual_seed(2))
    per = objective.per_input_losses(model, task, batch, seeds)  # [6, 2]
    from interp_rand.losses import answer_loss
    for j in range(2):
        alone = answer_loss(model(batch.inputs, seeds=seeds[j].expand(6, -1)), batch, "bce")
        assert torch.allclose(per[:, j], alone, atol=1e-6)
    expected = per.mean(1).pow(3).mean().pow(1 / 3)
    got = objective(model, task, batch, torch.Generator().manual_seed(2))
    assert torch.allclose(got, expected, atol=1e-6)


def test_q_ramp_grows_geometrically_from_the_mean_to_q_and_changes_the_loss():
    objective = QNorm(TrainConfig(objective="qnorm", q=100.0, m_seeds=2, q_ramp_steps=10))
    assert objective.q_at(0) == 1.0
    assert objective.q_at(5) == pytest.approx(10.0)
    assert objective.q_at(10) == objective.q_at(10_000) == 100.0
    task = make_task("recall", n_pairs=4)
    model = HookedTransformer(task.model_config(d_model=16), seed=0)
    batch = task.sample(6, torch.Generator().manual_seed(1))
    seeds = objective.seeds(task, torch.Generator().manual_seed(2))
    per_input = objective.per_input_losses(model, task, batch, seeds).mean(1)
    for step, q in ((0, 1.0), (5, 10.0), (99, 100.0)):
        got = objective(model, task, batch, torch.Generator().manual_seed(2), step=step)
        assert torch.allclose(got, per_input.pow(q).mean().pow(1 / q), atol=1e-6)
    assert not torch.allclose(objective(model, task, batch, torch.Generator().manual_seed(2), step=0),
                              objective(model, task, batch, torch.Generator().manual_seed(2), step=99))


@pytest.mark.parametrize("field, value", [("q", 0.5), ("q_ramp_steps", -1), ("q", float("nan")), ("m_seeds", 0), ("seed_source", "both")])
def test_bad_settings_name_the_value(field, value):
    with pytest.raises(ValueError, match=field):
        TrainConfig(objective="qnorm", **{field: value})


def test_qnorm_needs_a_seeded_task(tmp_path):
    task = make_task("sort", length=3, vocab=4)
    with pytest.raises(ValueError, match="seed channel"):
        train(task, task.model_config(d_model=16, n_heads=2, n_layers=1),
              TrainConfig(objective="qnorm", q=2.0, m_seeds=2, steps=2), tmp_path, progress=False)


def test_seed_width_that_does_not_match_the_model_is_refused():
    task = make_task("recall", n_pairs=4)
    model = HookedTransformer(task.model_config(d_model=16, d_seed=7), seed=0)
    batch = task.sample(2, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="d_seed=7"):
        model(batch.inputs, seeds=batch.seeds)


def test_nan_midway_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    """A q-norm run whose loss turns NaN after its step-5 checkpoint stops naming step 6 and
    leaves that checkpoint byte-for-byte as it was."""
    from interp_rand.training import load_checkpoint
    from interp_rand.training.checkpoint import step_dir
    from interp_rand.training.trainer import TrainingDiverged

    task = make_task("recall", n_pairs=4)
    config = TrainConfig(objective="qnorm", q=2.0, m_seeds=2, steps=5, batch_size=8, checkpoint_every=5,
                         eval_every=5, eval_size=16, warmup_steps=0)
    mcfg = task.model_config(d_model=16)
    train(task, mcfg, config, tmp_path, progress=False)
    saved = (step_dir(tmp_path, 5) / "model.safetensors").read_bytes()
    monkeypatch.setattr(QNorm, "__call__", lambda self, *args, **kwargs: torch.tensor(float("nan"), requires_grad=True))
    with pytest.raises(TrainingDiverged, match="step 6"):
        train(task, mcfg, dataclasses.replace(config, steps=10), tmp_path, progress=False)
    assert (step_dir(tmp_path, 5) / "model.safetensors").read_bytes() == saved
    assert load_checkpoint(tmp_path).step == 5


def test_cli_eval_of_a_fixed_seed_run_uses_r0(tmp_path, monkeypatch):
    """A model trained only on r0 is evaluated on r0 by ``interp-rand eval`` (fresh seeds would
    measure something it was never asked to do)."""
    import json

    from interp_rand.cli import main

    code = main(["train", "recall", "--n-pairs", "4", "--d-model", "16", "--steps", "3", "--batch-size", "8",
                 "--eval-every", "3", "--eval-size", "8", "--seed-source", "fixed", "--quiet", "--out", str(tmp_path)])
    assert code == 0
    seen = []
    original = HookedTransformer.forward

    def spy(self, inputs, seeds=None, attention_mask=None):
        seen.append(seeds)
        return original(self, inputs, seeds=seeds, attention_mask=attention_mask)

    monkeypatch.setattr(HookedTransformer, "forward", spy)
    assert main(["eval", str(tmp_path), "--n", "20"]) == 0
    r0 = make_task("recall", n_pairs=4).fixed_seed()
    assert seen and all(torch.equal(s, r0.expand_as(s)) for s in seen)
    assert json.loads((tmp_path / "eval.json").read_text())["n_examples"] == 20
