"""A property-based test of the command line's parser (hypothesis): random values for every
option of every command, NaN, inf, huge, negative, empty and non-UTF-8 among them, parsed only
(:func:`interp_rand.cli.main.parse`, no command's work): every outcome is a parse, or exit 2
with one line on stderr; never a traceback. Derandomized, so CI sees the same examples."""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import os

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from interp_rand.cli.main import build_parser, parse  # noqa: E402

EXAMPLES = 400
PARSER = build_parser()


def _commands(parser: argparse.ArgumentParser, chain: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command path (``("train", "sort")``, ``("eval",)``) with its parser."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _commands(sub, chain + (name,))
    return found or [(chain, parser)]


COMMANDS = _commands(PARSER)

# the values a hostile user tries
NASTY = st.sampled_from(["nan", "NaN", "inf", "-inf", "+inf", "1e308", "-1e308", "1e309", "1e999", "0", "-0", "-1",
                         "-2", "1", "2", "0.5", "1e-320", "999999999999", "1000000000000", "9" * 25, "9" * 5000,
                         "-" + "9" * 30, "", " ", "none", "None", "auto", "true", "0x10", "1_000", "١٢", "1.2@7",
                         "0.0@0", "-1.0@0", "a.b=c", "probe.alpha=nan", "circuit.size=-1", "x=1", "zoo:sort",
                         "zoo:../../x", "/", ".", "..", "/dev/null", "/proc/self/mem", "a\x00b", "\n", "--", "-"])
NON_UTF8 = st.binary(min_size=1, max_size=8).map(os.fsdecode)  # as sys.argv decodes such bytes
NUMBERS = st.one_of(st.integers(-10**20, 10**20).map(str),
                    st.floats(allow_nan=True, allow_infinity=True).map(repr))
TEXT = st.text(max_size=12)
VALUE = st.one_of(NASTY, NON_UTF8, NUMBERS, TEXT)


def _value_of(action: argparse.Action) -> st.SearchStrategy[list[str]]:
    """The words an option (or positional) takes: one of its choices or a nasty value."""
    choices = st.sampled_from([str(c) for c in action.choices]) if action.choices else None
    one = st.one_of(choices, VALUE) if choices is not None else VALUE
    if action.nargs in ("+", "*"):
        return st.lists(one, min_size=1, max_size=2)
    return one.map(lambda v: [v])


def _strategy(chain: tuple[str, ...], parser: argparse.ArgumentParser) -> st.SearchStrategy[list[str]]:
    """Command lines of one command: its words, its positionals, up to 4 of its options."""
    positionals = [_value_of(a) for a in parser._actions
                   if not a.option_strings and not isinstance(a, argparse._SubParsersAction)]
    options = []
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        flags = st.sampled_from(action.option_strings)
        options.append(flags.map(lambda f: [f]) if action.nargs == 0  # store_true, --x/--no-x
                       else st.tuples(flags, _value_of(action)).map(lambda fv: [fv[0], *fv[1]]))
    globals_ = st.lists(st.one_of(*options_of(PARSER)), max_size=1)
    return st.tuples(globals_, st.tuples(*positionals) if positionals else st.just(()),
                     st.lists(st.one_of(*options), max_size=4) if options else st.just([])).map(
        lambda parts: [w for o in parts[0] for w in o] + list(chain) + [w for p in parts[1] for w in p]
        + [w for o in parts[2] for w in o])


def options_of(parser: argparse.ArgumentParser) -> list[st.SearchStrategy[list[str]]]:
    return [st.tuples(st.just(a.option_strings[0]), VALUE).map(list) for a in parser._actions
            if a.option_strings and a.dest != "help"]


COMMAND_LINES = st.one_of(*[_strategy(chain, parser) for chain, parser in COMMANDS])


OUTCOMES: collections.Counter = collections.Counter()


def _outcome(argv: list[str]) -> tuple[str, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            parse(argv, parser=PARSER)
        except SystemExit as exit:
            return f"exit {exit.code}", err.getvalue()
    return "parsed", err.getvalue()


@settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(COMMAND_LINES)
def test_every_command_line_parses_or_is_refused_in_one_line(argv):
    outcome, err = _outcome(argv)  # any other exception fails the test with its traceback
    lines = err.splitlines()
    OUTCOMES[outcome] += 1
    if outcome == "parsed":
        assert len(lines) <= 1 and all("--threads" in line for line in lines), (argv, err)  # the clamp's note
    else:
        assert outcome == "exit 2", (argv, outcome, err)
        assert len(lines) == 1 and ": error: " in lines[0], (argv, err)
        assert "Traceback" not in err


def test_the_property_test_saw_both_outcomes():
    """Run after the property test (file order): the examples covered parses and refusals, and
    their counts are printed for the record (``pytest -s``)."""
    if not OUTCOMES:
        pytest.skip("run together with the property test")
    print(f"\nparser property test: {sum(OUTCOMES.values())} examples: {dict(OUTCOMES)}")
    assert OUTCOMES["parsed"] > 0 and OUTCOMES["exit 2"] > 0


@pytest.mark.parametrize("argv, named", [
    (["replay", "RUN", "--set", "probe.alpha=nan"], "probe.alpha=nan"),
    (["circuit", "RUN", "--out", "o", "--method", "acdc", "--threshold", "nan"], "--threshold"),
    (["train", "sort", "--init-range", "nan"], "--init-range"),
    (["train", "sort", "--eps", "nan"], "--eps"),
    (["train", "sort", "--q", "1e308"], "--q"),
    (["train", "sort", "--lr", "inf"], "--lr"),
    (["train", "sort", "--stop-at-exact-match", "2"], "--stop-at-exact-match"),
    (["qsweep", "recall", "--qs", "1,nan"], "--qs"),
    (["eval", "RUN", "--seed", "-1"], "--seed"),
    (["train", "sort", "--steps", "9" * 25], "--steps"),
])
def test_non_finite_and_out_of_range_numbers_are_refused_naming_the_option(argv, named):
    outcome, err = _outcome(argv)
    assert outcome == "exit 2" and len(err.splitlines()) == 1 and named in err, err


def test_infinite_q_is_the_worst_input_and_allowed():
    assert _outcome(["train", "sort", "--q", "inf", "--objective", "qnorm"])[0] == "parsed"


@pytest.mark.parametrize("argv, named", [
    (["eval", "zoo:sort", "--n", "1000000000"], "--n"),
    (["eval", "zoo:sort", "--n", "10", "--seeds", "1000000000000"], "--seeds"),
    (["train", "sort", "--batch-size", "1000000000"], "--batch-size"),
    (["train", "sort", "--d-model", "1000000000"], "--d-model"),
    (["circuit", "zoo:sort", "--out", "o", "--n", "10000000000"], "--n"),
])
def test_sizes_beyond_the_machine_are_refused_with_the_estimate(argv, named):
    outcome, err = _outcome(argv)
    assert outcome == "exit 2" and len(err.splitlines()) == 1, err
    assert f"argument {named}:" in err and "needs at least" in err and "available" in err, err


def test_a_size_that_fits_is_not_refused():
    assert _outcome(["eval", "zoo:sort", "--n", "10000"])[0] == "parsed"
    assert _outcome(["train", "sort", "--batch-size", "512", "--d-model", "256"])[0] == "parsed"


def test_the_estimate_counts_the_run_s_own_model(tmp_path):
    from interp_rand.cli import memory

    small = memory.example_bytes({"d_model": 64, "n_layers": 2, "n_heads": 4, "n_ctx": 11, "d_vocab": 11})
    large = memory.example_bytes({"d_model": 640, "n_layers": 2, "n_heads": 4, "n_ctx": 11, "d_vocab": 11})
    assert large > 5 * small
    args = PARSER.parse_args(["eval", "zoo:sort", "--n", "10"])
    model, which = memory.model_of(args)
    assert model["d_model"] == 64 and "zoo:sort" in which  # read from the zoo model's checkpoint.json
    small = memory.example_bytes(model)
    with pytest.raises(SystemExit):  # the same --n refused on a machine with less memory
        with contextlib.redirect_stderr(io.StringIO()):
            memory.check(PARSER, args, available=10 * small - 1)
    memory.check(PARSER, args, available=10 * small + 1)


def test_threads_beyond_the_cores_are_clamped_with_a_note():
    from interp_rand.threads import cores

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        args = parse(["--threads", "100000", "tasks"], parser=PARSER)
    assert args.threads == cores() and "--threads 100000" in err.getvalue() and len(err.getvalue().splitlines()) == 1


def test_a_run_name_the_file_system_cannot_hold_is_refused_in_one_line(capsys):
    """A name too long for the file system (the property test's find) is a missing run, said in
    one line with the name shortened, not an OSError."""
    from interp_rand.cli.main import main

    assert main(["gridworld", "eval", "9" * 5000]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "does not exist" in err and len(err) < 300
