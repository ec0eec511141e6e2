"""Tasks own their special cases: the capabilities analyses ask for instead of a task's name,
and the randomized tasks' paper experiments (scales, sweep, evaluation size, the paper's values)."""

from __future__ import annotations

import dataclasses

import pytest

from interp_rand import tasks
from interp_rand.tasks import (
    CAPABILITIES,
    CARRIES,
    CYCLE_NEIGHBOURS,
    KEY_VALUE_RECALL,
    SORTED_OUTPUT,
    Experiment,
    experiments,
    has_capability,
    make_task,
    require_capability,
    task_class,
    task_names,
    tasks_with,
)
from interp_rand.tasks.randomized import ExperimentScale


def test_every_task_declares_known_capabilities_only():
    for name in task_names():
        declared = getattr(task_class(name), "capabilities", frozenset())
        assert isinstance(declared, frozenset) and declared <= set(CAPABILITIES), name
    assert {c: tasks_with(c) for c in CAPABILITIES} == {
        CARRIES: ["addition"], SORTED_OUTPUT: ["sort"], KEY_VALUE_RECALL: ["recall"], CYCLE_NEIGHBOURS: ["coloring"]}


def test_a_capability_is_asked_of_a_task_or_its_class():
    assert has_capability(make_task("addition", n_digits=2), CARRIES)
    assert has_capability(task_class("addition"), CARRIES)
    assert not has_capability(make_task("sort"), CARRIES)
    assert not has_capability(object(), CARRIES)  # no ``capabilities``: none
    with pytest.raises(ValueError, match="unknown task capability 'carry'"):
        has_capability(make_task("addition"), "carry")


def test_require_capability_names_the_analysis_the_capability_and_the_tasks_that_have_it():
    require_capability(make_task("recall"), KEY_VALUE_RECALL, "the stored-set map")  # no error
    with pytest.raises(ValueError) as err:
        require_capability(make_task("sort"), CYCLE_NEIGHBOURS, "symmetry breaking")
    assert str(err.value) == "symmetry breaking needs a task with cycle_neighbours (registered: coloring); got 'sort'"


def test_the_randomized_tasks_hold_their_experiments():
    found = experiments()
    assert sorted(found) == ["coloring", "recall"]
    assert all(found[name] is task_class(name).experiment for name in found)
    for name, exp in found.items():
        assert isinstance(exp, Experiment)
        assert {"cpu", "paper"} <= set(exp.scales)  # recall adds the public port's recipe, "port"
        assert all(isinstance(s, ExperimentScale) for s in exp.scales.values())
        assert exp.eval_inputs >= 1 and exp.paper_note.startswith("paper: ")
        for scale in exp.scales.values():  # every setting of the sweep is a valid task config
            for config in exp.settings(scale):
                make_task(name, **config)
        for point in exp.paper_points:  # each point names its x value and a column of the table
            assert exp.sweep_key in point and point["variant"].startswith("A^")
            assert point["metric"] in ("average", "worst_5pct", "majority_5_worst", "majority_30_worst")
            assert point.get("bound", "≤") == "≤" and 0.0 <= point["value"] <= 1.0
        with pytest.raises(dataclasses.FrozenInstanceError):
            exp.eval_inputs = 1  # type: ignore[misc]


def test_the_experiments_keep_the_papers_sweeps_and_sizes():
    recall, coloring = task_class("recall").experiment, task_class("coloring").experiment
    assert (recall.sweep_key, recall.eval_inputs, recall.extra_q) == ("N", 1000, ())
    assert (coloring.sweep_key, coloring.eval_inputs, coloring.extra_q) == ("q", 5000, (2.0, 3.0, 4.0))
    assert recall.settings(recall.scales["paper"]) == [{"n_pairs": n} for n in (8, 10, 11, 12, 14, 16, 20)]
    assert coloring.settings(coloring.scales["cpu"]) == [{"n_vertices": 10}]
    assert len(recall.paper_points) == 35 and len(coloring.paper_points) == 6
    port = recall.scales["port"]  # the public port's recipe: batch 512, 10k steps, cosine to about 9e-7
    assert (port.batch_size, port.steps, port.warmup_steps, port.lr * port.min_lr_ratio) == (512, 10_000, 333,
                                                                                          pytest.approx(9e-7))
    assert recall.settings(port) == [{"n_pairs": 14}, {"n_pairs": 16}] and port.eval_seeds == "all"


def test_the_deterministic_tasks_have_no_experiment():
    assert getattr(task_class("sort"), "experiment", None) is None
    assert getattr(task_class("addition"), "experiment", None) is None
    assert "Experiment" in tasks.__all__ and "has_capability" in tasks.__all__
