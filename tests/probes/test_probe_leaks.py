"""Probes cannot pass on a leak: where the input token at a position gives the probed variable
(teacher forcing), the position is flagged by measurement (a lookup from the token, fitted on
the training groups, scored on the held-out ones) and never selected; the random-init control
stands beside every selected probe, in the rows and in the HTML table."""

from __future__ import annotations

import re

import pytest
import torch

from interp_rand.model import HookedTransformer, ModelConfig
from interp_rand.tasks import Batch, TaskSpec
from probes import ProbeConfig, probe_task
from probes.controls import token_lookup_accuracy
from probes.suite import LEAK_ABSOLUTE, leaks
from probes.variables import VariableLabels

L, V = 4, 6
SEP = V


def _copy(n, generator):
    """A user's teacher-forced copy task: ``x0..x3 SEP y0 y1 y2`` with ``y = x``; the answers are
    predicted at positions 4..7, so the token at position ``k`` and at ``L + k + 1`` is answer k."""
    x = torch.randint(0, V, (n, L), generator=generator)
    inputs = torch.cat([x, torch.full((n, 1), SEP), x[:, :-1]], 1)
    answers = torch.arange(L, 2 * L)
    targets = torch.full_like(inputs, -1)
    targets[:, answers] = x
    mask = torch.zeros_like(inputs, dtype=torch.bool)
    mask[:, answers] = True
    return Batch(inputs, targets, mask, answers)


def _next(task, batch, model):
    answers = batch.answer_positions
    return VariableLabels(batch.targets[:, answers], V, tuple(f"answer {k}" for k in range(L)),
                          control_types=batch.inputs[:, answers], output_index=torch.arange(L))


COPY = TaskSpec("copy", _copy, [f"x{i}" for i in range(L)] + ["SEP"] + [f"y{i}" for i in range(L - 1)],
                variables={"next": _next})


def _copy_model():
    return HookedTransformer(ModelConfig(d_model=16, n_heads=2, n_layers=1, n_ctx=2 * L, d_vocab=V + 1), seed=0).eval()


def _raw_pick(result, k):
    """The (hook, position) the table picked before leaks were measured: the plain argmax."""
    sel = result.selectivity[..., k]
    h, p = divmod(int(sel.argmax()), sel.shape[1])
    return result.hooks[h], int(result.positions[p])


def test_the_token_lookup_is_measured_on_held_out_rows():
    """Position 0 holds the label, position 1 holds the label plus one mod 3 (a lookup learns it),
    position 2 is noise; a token never seen in training is given the training majority."""
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 3, (400, 1), generator=g)
    inputs = torch.stack([labels[:, 0], (labels[:, 0] + 1) % 3, torch.randint(0, 50, (400,), generator=g)], 1)
    train = torch.arange(400) < 300
    acc = token_lookup_accuracy(inputs, torch.arange(3), labels, 3, train)
    assert acc[0, 0] == 1 and acc[1, 0] == 1 and acc[2, 0] < 0.6
    unseen = inputs.clone()
    unseen[~train, 0] = 99  # held-out tokens never seen: the lookup falls back to the majority
    majority = float((labels[~train, 0] == torch.bincount(labels[train, 0]).argmax()).float().mean())
    assert float(token_lookup_accuracy(unseen, torch.arange(1), labels, 3, train)[0, 0]) == pytest.approx(majority)


def test_the_leak_rule():
    """A leak: the token lookup reaches 0.95, or comes within the margin of the best probe at that
    position; never where the lookup is no better than the majority class."""
    accuracy = torch.tensor([[[0.99, 0.99, 0.60, 0.99]], [[0.99, 0.80, 0.61, 0.99]]])  # [H=2, P=1, K=4]
    token = torch.tensor([[LEAK_ABSOLUTE, 0.50, 0.60, 0.97]])
    majority = torch.tensor([0.2, 0.2, 0.2, 0.97])
    assert leaks(token, accuracy, majority).tolist() == [[True, False, True, False]]


def test_a_teacher_forced_copy_leak_is_flagged_and_never_selected():
    """The issue's case on a user's task: the copied answer is the token at position k and at
    L + k + 1. Both are flagged (lookup 1.0), and the table picks neither, where it picked a
    leaking position before (so this test fails without the leak check)."""
    batch = _copy(1000, torch.Generator().manual_seed(1))
    (result,) = probe_task(_copy_model(), COPY, batch, ProbeConfig(causal=False))
    rows = result.rows()
    picked_a_leak_before = 0
    for k, row in enumerate(rows):
        leaking = {k} | ({L + k + 1} if k < L - 1 else set())
        flagged = set(result.positions[result.leak[:, k]].tolist())
        assert leaking <= flagged, (k, flagged)
        assert all(float(result.token_accuracy[p, k]) == 1.0 for p in leaking)
        assert row["position"] not in flagged and row["token_lookup"] < LEAK_ABSOLUTE
        for p in sorted(leaking):
            assert f"{p} (token 1.00)" in row["leaks_skipped"]
        # the random-init control beside the selected probe, and its verdict
        assert list(row)[4:7] == ["accuracy", "random_accuracy", "learned"]
        picked_a_leak_before += _raw_pick(result, k)[1] in leaking
    assert picked_a_leak_before >= 2


def test_the_trained_sort_models_teacher_forced_answers_are_skipped():
    """zoo:sort (trained): the next answer is the token one position later; the table picked
    those positions at the embedding (accuracy 1.0, as a random-init model) and now skips them."""
    from interp_rand.training.checkpoint import load_checkpoint

    ckpt = load_checkpoint("zoo:sort")
    task = ckpt.spec.make_task()
    batch = task.sample(2000, torch.Generator().manual_seed(0))
    (result,) = probe_task(ckpt.model(), task, batch, ProbeConfig(variables=("next",), causal=False))
    n = task.length
    raw = [_raw_pick(result, k) for k in range(n)]
    assert sum(p == n + k + 1 for k, (_, p) in enumerate(raw)) >= 2  # before: leaks chosen
    for k, row in enumerate(result.rows()):
        if k < n - 1:
            assert bool(result.leak[n + k + 1, k]) and float(result.token_accuracy[n + k + 1, k]) == 1.0
        assert not bool(result.leak[row["position"], k]) and row["position"] != n + k + 1


def test_a_real_variable_is_not_flagged():
    """zoo:addition's units digit at its output position: the input token there (the teacher-
    forced tens digit) says little about it (lookup ~0.16), the trained probe reads it (1.0) and a
    random-init model does not: not a leak, selected, learned."""
    from interp_rand.training.checkpoint import load_checkpoint

    ckpt = load_checkpoint("zoo:addition")
    task = ckpt.spec.make_task()
    batch = task.sample(2000, torch.Generator().manual_seed(0))
    (result,) = probe_task(ckpt.model(), task, batch, ProbeConfig(variables=("digit",), causal=False))
    k = result.instance_names.index("place 0")
    out = int(batch.answer_positions[k])
    row = result.rows()[k]
    assert not bool(result.leak[out, k])
    assert row["position"] == out and row["accuracy"] > 0.95 and row["token_lookup"] < 0.3
    assert row["learned"] == "yes" and row["random_accuracy"] < 0.5 and row["leaks_skipped"] == ""


def test_the_html_table_shows_the_random_init_control_beside_each_probe_and_the_leaks():
    from probes.report import ReportConfig, build_report
    from probes.report_html import render_html

    data = build_report(_copy_model(), COPY, ReportConfig(n_examples=32, n_probe_examples=400, probes=True),
                        info={"run": "copy"})
    page = render_html(data)
    table = page[page.index("<h2>Probes</h2>"):]
    header = re.findall(r"<th>([^<]*)</th>", table)
    assert header[header.index("accuracy"):header.index("accuracy") + 3] == ["accuracy", "random_accuracy", "learned"]
    assert "leaks_skipped" in header and "token_lookup" in header
    assert "(token 1.00)" in table and "never selected" in table
    for row in data.probe_rows:
        assert row["random_accuracy"] is not None and row["leaks_skipped"]
