import pytest
import torch

from interp_rand import HookedTransformer, make_task
from probes import control_labels, group_split, input_groups, probe_accuracy, variable_labels
from probes.linear_probe import LinearProbe


def test_linear_multiclass_labels_are_decoded_and_random_ones_are_not():
    g = torch.Generator().manual_seed(0)
    n, d = 3000, 12
    x = torch.randn(n, 2, d, generator=g)
    # position 0 carries a 4-class label linearly (argmax of 4 projections); position 1 is noise
    proj = torch.randn(d, 4, generator=g)
    labels = (x[:, 0] @ proj).argmax(-1)[:, None]
    x[:, 1] = torch.randn(n, d, generator=g)
    noise = torch.randint(0, 4, (n, 1), generator=g)
    train = torch.rand(n, generator=g) < 0.8
    (acc, acc_noise), W, b, mean, slices = probe_accuracy(x, [(labels, 4), (noise, 4)], train)
    assert acc.shape == (2, 1)
    assert acc[0, 0] > 0.85 and acc[1, 0] < 0.4
    assert 0.15 < acc_noise.mean() < 0.35
    probe = LinearProbe("h", 0, 0, W[0][:, slices[0][0]], b[0][slices[0][0]], mean[0])
    assert (probe.predict(x[~train, 0]) == labels[~train, 0]).float().mean() == pytest.approx(float(acc[0, 0]))
    assert probe.basis().shape == (d, 3)


def test_label_length_mismatch_is_an_error():
    x = torch.randn(10, 3, 4)
    with pytest.raises(ValueError, match=r"do not match the activations: expected \[n=10, k\]"):
        probe_accuracy(x, [(torch.zeros(9, 1, dtype=torch.long), 2)], torch.ones(10, dtype=torch.bool))


def test_control_labels_are_fixed_per_type_with_the_real_class_balance():
    g = torch.Generator().manual_seed(0)
    types = torch.randint(0, 50, (4000, 2), generator=g)
    labels = (torch.rand(4000, 2, generator=g) < 0.8).long()
    control = control_labels(types, labels, 2, g)
    for j in range(2):
        for t in types[:, j].unique()[:10]:
            assert control[types[:, j] == t, j].unique().numel() == 1
    # roughly the real balance (50 types, so loosely)
    assert 0.55 < control.float().mean() < 0.98


def test_group_split_keeps_groups_together():
    groups = torch.arange(100).repeat(5)
    train = group_split(groups, 0.2, torch.Generator().manual_seed(0))
    for gid in range(100):
        assert train[groups == gid].unique().numel() == 1
    assert (~train).sum() == 100
    with pytest.raises(ValueError, match="two distinct input groups"):
        group_split(torch.zeros(5, dtype=torch.long), 0.2, torch.Generator())


def test_sort_groups_are_list_multisets():
    task = make_task("sort", length=3, vocab=4)
    batch = task.build(torch.tensor([[1, 2, 3], [3, 2, 1], [1, 1, 2]]))
    groups = input_groups(task, batch)
    assert groups[0] == groups[1] != groups[2]


def test_variables_of_every_task_and_unknown_names():
    g = torch.Generator().manual_seed(0)
    for name, kw, variables in [
        ("addition", dict(n_digits=2), ("carry_in", "carry_out", "digit")),
        ("sort", dict(length=4, vocab=6), ("rank", "next")),
        ("recall", dict(n_pairs=4, value_bits=2, seed_bits=3), ("seed_bit", "key_stored")),
        ("coloring", dict(n_vertices=5), ("colour", "noise_order")),
    ]:
        task = make_task(name, **kw)
        model = HookedTransformer(task.model_config(d_model=16, n_heads=2, d_head=8), seed=0).eval()
        batch = task.sample(20, g)
        for v in variables:
            labels = variable_labels(task, batch, v, model)
            assert labels.labels.shape[0] == 20 and labels.labels.max() < labels.n_classes
        with pytest.raises(ValueError, match=f"provides no probe variable 'nope'; it provides: {variables[0]}"):
            variable_labels(task, batch, "nope", model)


def test_carry_counterfactual_and_noise_order_by_hand():
    task = make_task("addition", n_digits=2)
    batch = task.build(torch.tensor([[5, 4]]), torch.tensor([[5, 2]]))  # 45 + 25 = 070 (units first)
    v = variable_labels(task, batch, "carry_in")
    assert v.labels.tolist() == [[0, 1, 0]]  # places 2, 1, 0 (msb first)
    # flipping the carry into place 1 (4 + 2 + 1 = 7) to 0 makes that digit 6
    assert v.counterfactual(batch, 1, torch.tensor([0])).tolist() == [6]

    col = make_task("coloring", n_vertices=4)
    order = torch.tensor([[0, 1, 2, 3]])  # ring 0-1-2-3-0
    seeds = torch.tensor([[[0.1], [0.5], [0.9], [0.3]]])
    noise = variable_labels(col, col.build(order, seeds), "noise_order")
    # vertex 0 (0.1) is below both neighbours (0.5, 0.3); vertex 2 (0.9) above both
    assert noise.labels.tolist() == [[0, 1, 2, 1]]


def test_key_stored_matches_querying_each_key():
    task = make_task("recall", n_pairs=4, value_bits=2, seed_bits=3)
    model = HookedTransformer(task.model_config(d_model=16), seed=0).eval()
    batch = task.sample(30, torch.Generator().manual_seed(0))
    stored = variable_labels(task, batch, "key_stored", model).labels
    with torch.no_grad():
        logits = model(batch.inputs, seeds=batch.seeds)[:, task.n_pairs]
    correct = ((logits > 0).long() == batch.metadata["values"][torch.arange(30), batch.metadata["query_index"]]).all(-1)
    assert torch.equal(stored[torch.arange(30), batch.metadata["query_key"]], correct.long())
    with pytest.raises(ValueError, match="pass model="):
        variable_labels(task, batch, "key_stored")
