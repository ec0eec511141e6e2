"""The progress measures of addition and sort (interp_rand.reports.dynamics.progress): sub-task
accuracies against an independent integer-arithmetic computation, role scores on the planted
hand-set models, and the crossing/precedes comparison on hand-made tables."""

import pytest
import torch

from circuits.analyses.planted import addition_model, sort_model
from interp_rand.model.transformer import HookedTransformer
from interp_rand.reports.case_studies.carry import digit_accuracy
from interp_rand.reports.dynamics import DYNAMICS_ANALYSES, THRESHOLDS, CheckpointView, Threshold
from interp_rand.reports.dynamics.progress import (
    ROLE_THRESHOLD,
    addition_progress,
    answer_correctness,
    compare_to_loss,
    crossing_step,
    format_crossings,
    loss_drop_step,
    settled_step,
    sort_progress,
)
from interp_rand.tasks import make_task


def view_of(model, task, batch) -> CheckpointView:
    return CheckpointView(step=0, checkpoint=None, model=model.eval(), task=task, batch=batch, pairs=None, seed=0)


# ---------------------------------------------------------------------- sub-task accuracy


def reference_subtasks(model, task, batch) -> dict[str, float]:
    """The sub-task accuracies from the operands with plain integer arithmetic (not the
    task's metadata): per place, the true digit, its carry in and out and its cascade."""
    n = task.n_digits
    with torch.no_grad():
        predicted = model(batch.inputs).argmax(-1)[:, batch.answer_positions].tolist()
    places = [int(p) for p in task.answer_places()]
    hits: dict[str, list[int]] = {}
    for row in range(len(batch)):
        a_digits = batch.inputs[row, :n].tolist()  # most significant first
        b_digits = batch.inputs[row, n + 1:2 * n + 1].tolist()
        a = int("".join(map(str, a_digits)))
        b = int("".join(map(str, b_digits)))
        digit = lambda p, x: x // 10**p % 10  # noqa: E731
        nine = [digit(p, a) + digit(p, b) == 9 for p in range(n)]

        def carry_in(p: int) -> bool:
            return a % 10**p + b % 10**p >= 10**p

        def cascade_len(p: int) -> int:
            # the maximal run of 9-pairs holding p, or ending just below p (p receives its carry)
            if p < n and nine[p]:
                top = p
            elif p >= 1 and nine[p - 1]:
                top = p - 1
            else:
                return 0
            low = top
            while low - 1 >= 0 and nine[low - 1]:
                low -= 1
            high = top
            while high + 1 < n and nine[high + 1]:
                high += 1
            return high - low + 1 if carry_in(low) else 0

        for k, p in enumerate(places):
            right = int(predicted[row][k] == digit(p, a + b))
            cin = carry_in(p)
            cout = p < n and carry_in(p + 1)
            groups = ["use_carry" if cin else "base_add"] + (["make_carry"] if cout else [])
            if cin and cascade_len(p) >= 2:
                groups.append("cascade")
            for g in groups:
                hits.setdefault(f"subtask/{g}", []).append(right)
                hits.setdefault(f"subtask/{g}@place{p}", []).append(right)
    return {k: sum(v) / len(v) for k, v in hits.items()}


@pytest.fixture(scope="module")
def three_digit():
    """The 3-digit task and examples with cascades (half of them planted)."""
    task = make_task("addition", n_digits=3)
    return task, task.sample(512, torch.Generator().manual_seed(3))


def test_addition_subtasks_match_integer_arithmetic(three_digit, tmp_path):
    from interp_rand.training import TrainConfig, train

    task, batch = three_digit
    model = train(task, task.model_config(d_model=32, n_layers=1, n_heads=2),
                  TrainConfig(steps=60, batch_size=64, lr=3e-3, warmup_steps=5, eval_every=60, eval_size=64),
                  tmp_path, progress=False).model.eval()
    measures = addition_progress(view_of(model, task, batch))
    subtasks = {k: v for k, v in measures.items() if k.startswith("subtask/")}
    reference = reference_subtasks(model, task, batch)
    assert set(subtasks) == set(reference)
    for key, value in reference.items():
        assert subtasks[key] == pytest.approx(value, abs=1e-6), key
    assert {"subtask/cascade@place2", "subtask/make_carry@place0", "subtask/base_add@place3"} <= set(subtasks)
    assert "subtask/make_carry@place3" not in subtasks  # the top digit is the final carry: no carry out
    assert len({round(v, 3) for v in subtasks.values()}) > 3  # a model neither right nor wrong everywhere
    # the carry case study's split of the same digits agrees (one definition of each group)
    split = digit_accuracy(answer_correctness(model, task, batch), batch, batch,
                           answer_correctness(model, task, batch), min_cascade=2)
    assert (split.carry, split.no_carry, split.cascade) == pytest.approx(
        (subtasks["subtask/use_carry"], subtasks["subtask/base_add"], subtasks["subtask/cascade"]))


def test_planted_addition_roles_by_place():
    planted = addition_model()
    task = planted.task  # 2 digits, msb first: places 2, 1, 0
    batch = task.sample(256, torch.Generator().manual_seed(0))
    measures = addition_progress(view_of(planted.model, task, batch))
    # the planted model computes the tens digit s1 (place 1) right on every problem
    assert measures["subtask/base_add@place1"] == measures["subtask/use_carry@place1"] == 1.0

    def score(role, head, place):
        return measures[f"role/{role}@{head}:place{place}"]

    # a0.0 / a0.1 read a0 / b0 (by position, from every query): the carry source of place 1
    # and the aligned digits of place 0; a0.2 / a0.3 read a1 / b1: aligned at place 1 and
    # carry source of place 2. a0.4 (a distractor for edges) attends exactly like a0.0.
    for head in ("a0.0", "a0.1", "a0.4"):
        assert score("carry_source", head, 1) > 0.95 and score("aligned_digit", head, 0) > 0.95
        assert score("aligned_digit", head, 1) < 0.05 and score("carry_source", head, 2) < 0.05
    for head in ("a0.2", "a0.3"):
        assert score("aligned_digit", head, 1) > 0.95 and score("carry_source", head, 2) > 0.95
        assert score("carry_source", head, 1) < 0.05
    # layer 1's heads have no query-key weights: uniform attention, 2 of the 6-8 keys
    for head in ("a1.0", "a1.1", "a1.2", "a1.3", "a1.4"):
        assert score("carry_source", head, 1) < 0.35 and score("aligned_digit", head, 1) < 0.35
    assert measures["role/carry_source@best:place1"] == max(
        score("carry_source", f"a{l}.{h}", 1) for l in range(2) for h in range(5))


def test_planted_sort_next_larger():
    planted = sort_model()
    task, batch = planted.task, planted.clean  # distinct lists
    measures = sort_progress(view_of(planted.model, task, batch))
    # a0.0 (and a0.1, the same table into an unread subspace) attend to the next larger element
    for head in ("a0.0", "a0.1"):
        assert measures[f"role/next_larger@{head}"] > 0.95
        assert all(measures[f"role/next_larger@{head}:answer{k}"] > 0.95 for k in range(task.length))
    for head in ("a1.0", "a1.1"):  # no query-key weights: uniform over 11-20 keys
        assert measures[f"role/next_larger@{head}"] < 0.1
    assert measures["role/next_larger@best"] == max(measures[f"role/next_larger@a{l}.{h}"]
                                                     for l in range(2) for h in range(2))
    # it copies the next larger element: it sorts every distinct list (checked against sorted())
    with torch.no_grad():
        predicted = planted.model(batch.inputs).argmax(-1)[:, batch.answer_positions]
    expected = batch.inputs[:, :task.length].sort(1).values
    assert bool((predicted == expected).all())
    assert measures["subtask/distinct"] == 1.0 and "subtask/with_duplicates" not in measures


def test_sort_duplicates_split_against_exact_match():
    task = make_task("sort", length=5, vocab=10)
    batch = task.sample(400, torch.Generator().manual_seed(1))
    model = HookedTransformer(task.model_config(d_model=32, n_layers=1, n_heads=2), seed=0)
    measures = sort_progress(view_of(model, task, batch))
    with torch.no_grad():
        predicted = model(batch.inputs).argmax(-1)[:, batch.answer_positions]
    lists = batch.inputs[:, :task.length]
    exact = (predicted == lists.sort(1).values).all(1).float()
    has_duplicates = torch.tensor([len(set(r)) < task.length for r in lists.tolist()])
    assert measures["subtask/with_duplicates"] == pytest.approx(float(exact[has_duplicates].mean()))
    assert measures["subtask/distinct"] == pytest.approx(float(exact[~has_duplicates].mean()))


def test_registered_with_thresholds_and_task_checks():
    assert {"addition_progress", "sort_progress"} <= set(DYNAMICS_ANALYSES.names())
    for name in ("addition_progress", "sort_progress"):
        assert {t.prefix: t.value for t in THRESHOLDS.get(name)} == {"subtask/": 0.99, "role/": ROLE_THRESHOLD}
    planted = sort_model(n=4)
    with pytest.raises(ValueError, match="addition_progress needs a task with carries.*got 'sort'"):
        addition_progress(view_of(planted.model, planted.task, planted.clean))
    added = addition_model(n=4)
    with pytest.raises(ValueError, match="sort_progress needs a task with sorted_output.*got 'addition'"):
        sort_progress(view_of(added.model, added.task, added.task.sample(4, torch.Generator())))
    with pytest.raises(ValueError, match="min_cascade=0 must be an integer >= 1"):
        addition_progress(view_of(added.model, added.task, added.task.sample(4, torch.Generator())), min_cascade=0)


# ---------------------------------------------------------------------- against the loss curve

METRICS = [{"step": s, "loss": loss, "exact_match": acc} for s, loss, acc in
           [(100, 2.0, 0.0), (200, 1.5, 0.1), (300, 0.5, 0.6), (400, 0.15, 0.995), (500, 0.01, 1.0)]]
TABLE = [
    {"step": 100, "role/early@a0.0": 0.1, "role/late@a0.1": 0.1, "role/never@a1.0": 0.1, "subtask/x": 0.2},
    {"step": 200, "role/early@a0.0": 0.7, "role/late@a0.1": 0.2, "role/never@a1.0": 0.3, "subtask/x": 0.5},
    {"step": 300, "role/early@a0.0": 0.4, "role/late@a0.1": 0.3, "role/never@a1.0": 0.2, "subtask/x": 0.9},
    {"step": 400, "role/early@a0.0": 0.9, "role/late@a0.1": 0.45, "role/never@a1.0": 0.4, "subtask/x": 0.99},
    {"step": 500, "role/early@a0.0": 0.9, "role/late@a0.1": 0.8, "role/never@a1.0": 0.1, "subtask/x": 1.0},
]
THRESH = (Threshold("role/", 0.5), Threshold("subtask/", 0.99))


def test_crossing_step_and_loss_drop():
    assert crossing_step(TABLE, "role/early@a0.0", 0.5) == 200  # the first crossing, not the last
    assert crossing_step(TABLE[::-1], "role/late@a0.1", 0.5) == 500  # rows in any order
    assert crossing_step(TABLE, "role/never@a1.0", 0.5) is None
    assert crossing_step(METRICS, "loss", 0.5, rising=False) == 300
    assert crossing_step([{"step": 1}, {"step": 2, "k": 1.0}], "k", 1.0) == 2  # rows lacking the key skipped
    # role/early dips back below at step 300: it stays crossed from 400
    assert settled_step(TABLE, "role/early@a0.0", 0.5) == 400
    assert settled_step(TABLE, "role/late@a0.1", 0.5) == 500
    assert settled_step(TABLE, "role/never@a1.0", 0.5) is None
    assert settled_step(TABLE[:2], "role/early@a0.0", 0.5) == 200
    assert loss_drop_step(METRICS) == 400  # 0.15 <= 10% of 2.0; 0.5 at step 300 is not
    assert loss_drop_step(METRICS, fraction=0.3) == 300
    with pytest.raises(ValueError, match="fraction=1.5 must lie in"):
        loss_drop_step(METRICS, fraction=1.5)


def test_compare_to_loss_both_orders_and_never():
    crossings = {c.key: c for c in compare_to_loss(TABLE, METRICS, thresholds=THRESH)}
    assert list(crossings) == ["role/early@a0.0", "role/late@a0.1", "role/never@a1.0", "subtask/x"]
    early, late, never, same = (crossings[k] for k in crossings)
    assert (early.accuracy_step, early.loss_step) == (400, 400)
    assert early.step == 200 and early.settled == 400 and early.before_accuracy and early.before_loss
    assert early.relation() == "before"
    assert late.step == 500 and late.before_accuracy is False and late.relation("loss") == "after"
    assert never.step is None and never.before_accuracy is None and never.relation() == "never crosses"
    assert same.step == 400 and same.before_accuracy is False and same.relation() == "same step"
    row = early.to_dict()
    assert row["vs_accuracy"] == "before" and row["threshold"] == 0.5
    text = format_crossings(list(crossings.values()))
    assert "accuracy step: 400; loss-drop step: 400" in text and "never crosses" in text


def test_compare_to_loss_when_accuracy_never_gets_there():
    metrics = [{"step": s, "loss": 2.0, "exact_match": 0.5} for s in (100, 200, 300, 400, 500)]
    crossings = compare_to_loss(TABLE, metrics, thresholds=THRESH, keys=["role/late@a0.1"])
    assert len(crossings) == 1
    c = crossings[0]
    assert (c.accuracy_step, c.loss_step, c.step) == (None, None, 500)
    assert c.before_accuracy is True and c.before_loss is True  # it formed; accuracy never followed


def test_compare_to_loss_refuses_bad_input():
    with pytest.raises(ValueError, match="no rows"):
        compare_to_loss([], METRICS)
    with pytest.raises(ValueError, match=r"rows \[0\] have no 'step'"):
        compare_to_loss([{"role/x@a0.0": 1.0}], METRICS)
    with pytest.raises(ValueError, match="no metrics row has 'exact_match'"):
        compare_to_loss(TABLE, [{"step": 1, "loss": 1.0}])
    # keys no threshold covers are left out
    assert compare_to_loss([{"step": 1, "other/x": 1.0}], METRICS, thresholds=THRESH) == []
