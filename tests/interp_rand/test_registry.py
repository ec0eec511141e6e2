"""The one registry type (interp_rand.registry) and the nine registries built on it."""

import argparse
from typing import ClassVar

import pytest

from interp_rand.registry import DuplicateName, Option, Registry, UnknownName


def _one():
    return 1


def _two():
    return 2


# ---------------------------------------------------------------------- the type


def test_register_get_names_and_order():
    reg = Registry("widget")
    assert reg.register("b", _one, description="the first") is _one
    reg.register("a", _two)
    assert reg.get("b") is _one and reg.get("a") is _two
    assert reg.names() == ["b", "a"] == list(reg)  # registration order
    assert len(reg) == 2 and "a" in reg and "c" not in reg
    assert reg.entry("b").description == "the first"
    assert Registry("widget", sort=True).names() == []
    sorted_reg = Registry("widget", sort=True)
    sorted_reg.register("b", _one)
    sorted_reg.register("a", _two)
    assert sorted_reg.names() == ["a", "b"]
    assert [e.name for e in sorted_reg.entries()] == ["a", "b"]


def test_a_taken_name_is_refused_but_the_same_entry_again_is_a_no_op():
    reg = Registry("widget")
    reg.register("a", _one, description="d")
    assert reg.register("a", _one, description="d") is _one  # idempotent (re-import)
    with pytest.raises(DuplicateName, match=r"widget 'a' is already registered .*_one"):
        reg.register("a", _two)
    with pytest.raises(ValueError, match="already registered"):  # DuplicateName is a ValueError
        reg.register("a", _one, description="another description")
    assert reg.get("a") is _one


def test_an_unknown_name_lists_the_registered_ones():
    reg = Registry("widget", sort=True)
    reg.register("b", _one)
    reg.register("a", _two)
    with pytest.raises(UnknownName) as err:
        reg.get("c")
    assert str(err.value) == "unknown widget 'c'; registered widgets: a, b"  # not quoted like a KeyError
    assert isinstance(err.value, KeyError) and isinstance(err.value, ValueError)
    assert err.value.name == "c" and err.value.known == ["a", "b"]
    with pytest.raises(ValueError, match=r"registered widgets: \(none\)"):
        Registry("widget").get("c")
    with pytest.raises(KeyError, match="registered classes"):
        Registry("class", plural="classes").entry("c")


def test_temporary_registration_is_removed_on_exit_even_after_an_exception():
    reg = Registry("widget")
    reg.register("kept", _one)
    with reg.temporarily("tmp", _two, description="test only") as value:
        assert value is _two and reg.get("tmp") is _two
        assert reg.entry("tmp").description == "test only"
    assert "tmp" not in reg
    with pytest.raises(RuntimeError, match="boom"):
        with reg.temporarily("tmp", _two):
            assert "tmp" in reg
            raise RuntimeError("boom")
    assert reg.names() == ["kept"]


def test_temporary_registration_can_neither_replace_nor_remove_a_real_entry():
    reg = Registry("widget")
    reg.register("kept", _one)
    for value in (_two, _one):  # also not the same value: exit would remove the real entry
        with pytest.raises(DuplicateName, match="a temporary entry needs a new name"):
            with reg.temporarily("kept", value):
                pass  # pragma: no cover
    assert reg.get("kept") is _one


def test_a_replaced_entry_is_restored_on_exit_even_after_an_exception():
    reg = Registry("widget")
    reg.register("kept", _one, description="the real one")
    reg.register("last", _two)
    with reg.replaced("kept", _two) as value:
        assert value is _two and reg.get("kept") is _two
        assert reg.entry("kept").description == "the real one" and reg.names() == ["kept", "last"]
    assert reg.get("kept") is _one
    with pytest.raises(RuntimeError, match="boom"):
        with reg.replaced("kept", _two):
            raise RuntimeError("boom")
    assert reg.get("kept") is _one and reg.names() == ["kept", "last"]
    with pytest.raises(UnknownName, match="unknown widget 'new'"):  # it cannot add an entry
        with reg.replaced("new", _two):
            pass  # pragma: no cover
    assert "new" not in reg


def test_options_are_described_and_checked():
    steps = Option("steps", "int", 5, help="interpolation steps", minimum=1)
    assert Option.from_dict(steps.to_dict()) == steps
    assert steps.to_dict() == {"name": "steps", "type": "int", "default": 5, "help": "interpolation steps",
                               "minimum": 1}
    reg = Registry("method")
    reg.register("m", _one, description="a method", options=[steps, Option("fast", "bool", False)])
    entry = reg.entry("m")
    assert entry.options == (steps, Option("fast", "bool", False))  # a tuple, whatever was given
    assert entry.option("steps") is steps
    assert entry.defaults() == {"steps": 5, "fast": False}
    with pytest.raises(UnknownName, match="'m' has no option 'nope'; its options: steps, fast"):
        entry.option("nope")
    with pytest.raises(ValueError, match="is not one of"):
        Option("x", "list")
    with pytest.raises(ValueError, match="not an identifier"):
        Option("two words", "int")
    with pytest.raises(ValueError, match="only int and float options take a minimum"):
        Option("name", "str", minimum=0)
    with pytest.raises(ValueError, match="options named twice"):
        reg.register("n", _two, options=[steps, steps])


def test_check_runs_on_every_registration_including_temporary_ones():
    seen = []

    def check(entry):
        seen.append(entry.name)
        if entry.name == "bad":
            raise ValueError("bad entry")
        return entry

    reg = Registry("widget", check=check)
    reg.register("a", _one)
    with reg.temporarily("b", _two):
        pass
    with pytest.raises(ValueError, match="bad entry"):
        reg.register("bad", _one)
    assert seen == ["a", "b", "bad"] and reg.names() == ["a"]


# ---------------------------------------------------------------------- the nine registries


def test_the_nine_registries_are_registries_with_their_entries():
    from circuits.interventions.metrics import METRICS
    from circuits.methods.discovery import DISCOVERY_METHODS
    from interp_rand.losses import LOSS_KINDS
    from interp_rand.tasks.base import TASKS
    from interp_rand.training.objectives import OBJECTIVES
    from probes.attention import ATTENTION_CONDITIONS
    from probes.head_roles import HEAD_ROLES
    from probes.variables import INPUT_GROUPINGS, PROBE_VARIABLES

    registries = [TASKS, OBJECTIVES, LOSS_KINDS, DISCOVERY_METHODS, METRICS, PROBE_VARIABLES, INPUT_GROUPINGS,
                  HEAD_ROLES, ATTENTION_CONDITIONS]
    assert all(isinstance(r, Registry) for r in registries)
    assert TASKS.names() == ["addition", "coloring", "recall", "sort"]
    assert OBJECTIVES.names() == ["erm", "qnorm"]
    # the colouring task registers its loss kind on import (interp_rand.tasks.coloring)
    assert LOSS_KINDS.names() == ["bce", "ce", "coloring"]
    assert DISCOVERY_METHODS.names() == ["acdc", "eap", "eap-ig", "exact"]
    assert METRICS.names() == ["logit_diff", "logprob", "prob"]
    assert ("addition", "carry_in") in PROBE_VARIABLES and "sort" in INPUT_GROUPINGS
    assert "previous_token" in HEAD_ROLES and ("sort", "has duplicates") in ATTENTION_CONDITIONS
    assert TASKS.entry("sort").description == TASKS.get("sort").description
    assert all(e.description for e in DISCOVERY_METHODS.entries() + METRICS.entries() + OBJECTIVES.entries())


def test_every_registry_refuses_a_second_entry_under_a_taken_name():
    from circuits import register_method, register_metric
    from interp_rand.losses import register_loss_kind
    from interp_rand.tasks import register_task
    from interp_rand.training import register_objective
    from probes import register_condition, register_groups, register_role, register_variable

    class Sort:
        name: ClassVar[str] = "sort"

    class Erm:
        name: ClassVar[str] = "erm"

    attempts = {
        "task": lambda: register_task(Sort),
        "objective": lambda: register_objective(Erm),
        "loss kind": lambda: register_loss_kind("ce", _one, _one),
        "discovery method": lambda: register_method("eap")(_one),
        "metric": lambda: register_metric("logprob")(_one),
        "probe variable": lambda: register_variable("addition", "carry_in", "again")(_one),
        "input grouping": lambda: register_groups("sort")(_one),
        "head role": lambda: register_role("previous_token", "again")(_one),
        "attention condition": lambda: register_condition("sort", "has duplicates")(_one),
    }
    for kind, attempt in attempts.items():
        with pytest.raises(DuplicateName, match=f"^{kind} .* is already registered"):
            attempt()


def test_lookups_keep_saying_what_is_allowed():
    from circuits import get_metric
    from interp_rand.losses import answer_loss
    from interp_rand.tasks import task_class
    from interp_rand.training import TrainConfig, make_objective
    from probes.variables import get_variable, variable_names

    with pytest.raises(ValueError, match="unknown task 'nope'; registered tasks: addition, coloring, recall, sort"):
        task_class("nope")
    with pytest.raises(ValueError, match="unknown objective 'nope'; registered objectives: erm, qnorm"):
        make_objective(TrainConfig(objective="nope"))
    with pytest.raises(ValueError, match="unknown metric 'acc'; registered metrics: logit_diff, logprob, prob"):
        get_metric("acc")
    with pytest.raises(ValueError, match="unknown loss kind 'mse'; registered loss kinds: bce, ce"):
        answer_loss(None, None, "mse")
    with pytest.raises(ValueError, match="task 'sort' provides no probe variable 'nope'; it provides: rank, next"):
        get_variable("sort", "nope")
    assert variable_names("sort") == ["rank", "next"] and variable_names("nosuchtask") == []


def test_a_temporary_objective_is_built_and_gone_afterwards():
    from interp_rand.training import ERM, TrainConfig, make_objective, objective_names
    from interp_rand.training.objectives import OBJECTIVES

    class Halved(ERM):
        name: ClassVar[str] = "test-registry-halved"

    with OBJECTIVES.temporarily(Halved.name, Halved, description="test only"):
        assert Halved.name in objective_names()
        assert isinstance(make_objective(TrainConfig(objective=Halved.name)), Halved)
    assert Halved.name not in objective_names()


def test_a_temporary_probe_variable_condition_and_role():
    from probes.attention import ATTENTION_CONDITIONS, conditions
    from probes.head_roles import HEAD_ROLES, HeadRole
    from probes.variables import PROBE_VARIABLES, ProbeVariable, get_variable, variable_names

    class Sort:
        name = "sort"

    variable = ProbeVariable("sort", "test_only", "test only", _one)
    with PROBE_VARIABLES.temporarily(("sort", "test_only"), variable):
        assert variable_names("sort") == ["rank", "next", "test_only"]
        assert get_variable("sort", "test_only") is variable
    assert variable_names("sort") == ["rank", "next"]
    with ATTENTION_CONDITIONS.temporarily(("sort", "test only"), _one):
        assert [name for name, _ in conditions(Sort())] == ["has duplicates", "all distinct", "test only"]
    assert [name for name, _ in conditions(Sort())] == ["has duplicates", "all distinct"]
    with HEAD_ROLES.temporarily("test_only", HeadRole("test_only", "test only", ("sort",), None)):
        assert HEAD_ROLES.get("test_only").tasks == ("sort",)
    assert "test_only" not in HEAD_ROLES


# ---------------------------------------------------------------------- discovery method options


def test_discovery_method_options_take_their_defaults_from_the_signature():
    from circuits.methods.discovery import DISCOVERY_METHODS

    assert DISCOVERY_METHODS.entry("eap-ig").options == (
        Option("steps", "int", 5, help="EAP-IG interpolation steps", minimum=1),)
    assert DISCOVERY_METHODS.entry("acdc").defaults() == {"threshold": 0.01}
    assert DISCOVERY_METHODS.entry("eap").options == ()

    def method(model, graph, data, metric, width: int = 3, progress: bool = False):
        return None

    with DISCOVERY_METHODS.temporarily("test-width", method, options=[Option("width", "int")]):
        assert DISCOVERY_METHODS.entry("test-width").defaults() == {"width": 3}
    with pytest.raises(ValueError, match="option 'height' is not a keyword argument with a default of method"):
        with DISCOVERY_METHODS.temporarily("test-width", method, options=[Option("height", "int")]):
            pass  # pragma: no cover
    with pytest.raises(ValueError, match="option 'width' says default 4, the method 3"):
        DISCOVERY_METHODS.register("test-width", method, options=[Option("width", "int", 4)])
    assert "test-width" not in DISCOVERY_METHODS


def test_the_catalogue_holds_the_methods_options_and_descriptions():
    from circuits.interventions.metrics import METRICS
    from circuits.methods.discovery import DISCOVERY_METHODS
    from interp_rand.cli import catalogue

    for entry in DISCOVERY_METHODS.entries():
        assert catalogue.method_options(entry.name) == list(entry.options)
        assert catalogue.method_description(entry.name) == entry.description
    for entry in METRICS.entries():
        assert catalogue.metric_description(entry.name) == entry.description


def _parser(command: str) -> argparse.ArgumentParser:
    from interp_rand.cli import circuit, compare

    commands = argparse.ArgumentParser().add_subparsers()
    return {"circuit": circuit, "compare": compare}[command].add_parser(commands)


@pytest.mark.parametrize("command", ["circuit", "compare"])
def test_method_flags_and_options_come_from_the_registry(command, capsys):
    from interp_rand.cli.options import method_options

    parser = _parser(command)
    argv = ["run", "--out", "out"] if command == "circuit" else ["run_a", "run_b", "--out", "out"]
    args = parser.parse_args(argv)
    assert args.steps == 5
    assert method_options(args, "eap-ig") == {"steps": 5}
    assert method_options(args, "eap") == {} and method_options(args, "exact") == {}
    # circuit's --threshold is also acdc's search threshold (unset: acdc's own 0.01); compare
    # chooses circuits by --top-k, so acdc keeps its default there (no option passed)
    assert method_options(args, "acdc") == ({"threshold": 0.01} if command == "circuit" else {})
    if command == "circuit":
        given = parser.parse_args(argv + ["--threshold", "0", "--steps", "7"])
        assert method_options(given, "acdc") == {"threshold": 0.0}
        assert method_options(given, "eap-ig") == {"steps": 7}
    with pytest.raises(SystemExit):
        parser.parse_args(argv + ["--steps", "0"])
    assert "must be an integer >= 1, got 0" in capsys.readouterr().err
    help_text = parser.format_help()
    assert "EAP-IG interpolation steps (default: 5)" in help_text
    assert "eap-ig: EAP with integrated gradients" in " ".join(help_text.split())
