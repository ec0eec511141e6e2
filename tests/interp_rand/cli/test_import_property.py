"""A property-based test of ``interp-rand import`` and ``--model MODULE:FUNCTION`` (hypothesis),
like the parser's (test_parse_property.py), but through the whole command, in process
(:func:`interp_rand.cli.main.main`): damaged port checkpoints (truncated, bytes flipped, config
fields of the wrong type or out of range, huge declared shapes, missing or misshapen weights),
damaged Hugging Face folders (config.json, weights), and user functions that raise, recurse,
exit, wait for a debugger or return the wrong thing, with bad targets and task configs. Every
one must be refused: exit 1 or 2, one line on stderr, no traceback, no folder left behind.
Derandomized, so CI sees the same examples; the counts are printed (``pytest -s``)."""

from __future__ import annotations

import collections
import contextlib
import io
import itertools
import json
import os
import re
import sys
import types

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from interp_rand.cli.main import main  # noqa: E402

EXAMPLES = 80  # per property
SETTINGS = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])
CASES: collections.Counter = collections.Counter()
LINES: dict[str, set[str]] = collections.defaultdict(set)
_ids = itertools.count()

from port_checkpoints import port_config as _port_config, port_params as _port_params  # noqa: E402

# values of the wrong type or out of range, for any field
BAD = st.sampled_from([None, True, False, -1, 0, 2.5, float("nan"), float("inf"), 10**9, 10**12, 2**70, "x", "",
                       "12", [1, 2], [], {}, {"a": 1}, (3,)])


def _outcome(argv: list[str], out: str | None, cwd_before: set[str], cwd: str) -> None:
    """Run the command; assert it is refused in one line and leaves nothing behind."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exit:
            code = exit.code
    text = err.getvalue()
    lines = [line for line in text.splitlines() if line.strip()]
    assert code in (1, 2), (argv, code, text)
    assert len(lines) == 1 and "Traceback" not in text, (argv, text)
    assert ": error: " in lines[0], (argv, text)
    if out is not None:
        assert not os.path.exists(out), (argv, "left", os.listdir(out))
    assert set(os.listdir(cwd)) == cwd_before, (argv, set(os.listdir(cwd)) - cwd_before)
    kind = f"import {argv[3]}" if argv[2] == "import" else "--model"
    CASES[kind] += 1
    LINES[kind].add(_normalise(lines[0]))


def _normalise(line: str) -> str:
    """The error line with paths and numbers replaced, so that lines that differ only there count once."""
    line = re.sub(r"/\S+", "PATH", line)
    return re.sub(r"\d+(\.\d+)?(e[+-]?\d+)?", "N", line)


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    root = tmp_path_factory.mktemp("import-property")  # the generated files, and each --out
    cwd = root / "cwd"
    cwd.mkdir()
    old = os.getcwd()
    os.chdir(cwd)  # the commands run here; any file that appears is a leak
    yield cwd
    os.chdir(old)


def _run(place, argv, out=None):
    before = set(os.listdir(place))
    _outcome(["--threads", "1", *argv], out, before, str(place))


# ---------------------------------------------------------------------- haiku-recall (the port's .npy)

class _Declared:
    """Pickles as a float32 array that declares ``shape`` (its data far shorter)."""

    def __init__(self, shape):
        self.shape = shape

    def __reduce__(self):
        fun, args, state = np.zeros(3, np.float32).__reduce__()
        state = list(state)
        state[1] = self.shape
        return fun, args, tuple(state)


CONFIG_KEYS = sorted(_port_config())
PARAM_LEAVES = [(m, k) for m, leaves in _port_params().items() for k in leaves]
PORT_EDITS = st.lists(st.one_of(
    st.tuples(st.just("config"), st.sampled_from(CONFIG_KEYS + ["GD_PARAM.lr", "GD_PARAM.betas"]), BAD),
    st.tuples(st.just("drop config"), st.sampled_from(CONFIG_KEYS), st.none()),
    st.tuples(st.just("drop leaf"), st.sampled_from(PARAM_LEAVES), st.none()),
    st.tuples(st.just("declared"), st.sampled_from(PARAM_LEAVES),
              st.sampled_from([(10**12,), (200_000, 200_000), (2**40, 2**30), (0,), (-1, 3)])),
    st.tuples(st.just("value"), st.sampled_from(PARAM_LEAVES), st.sampled_from(["nan", "inf", "str", "int", "scalar"])),
), min_size=1, max_size=3)
FILE_DAMAGE = st.one_of(st.tuples(st.just("truncate"), st.floats(0, 0.99)),
                        st.tuples(st.just("flip"), st.integers(0, 200)),
                        st.tuples(st.just("bytes"), st.binary(max_size=64)),
                        st.tuples(st.just("none"), st.none()))


def _write_port(path, edits, damage):
    config, params = _port_config(), {m: dict(leaves) for m, leaves in _port_params().items()}
    params = {m: dict(leaves) for m, leaves in params.items()}
    for what, where, value in edits:
        if what == "config":
            if where.startswith("GD_PARAM."):
                config["GD_PARAM"] = {**config["GD_PARAM"], where.split(".")[1]: value}
            else:
                config[where] = value
        elif what == "drop config":
            config.pop(where, None)
        elif what == "drop leaf":
            params[where[0]].pop(where[1], None)
        elif what == "declared":
            params[where[0]][where[1]] = _Declared(value)
        else:
            array = params[where[0]].get(where[1])
            if isinstance(array, np.ndarray) and array.dtype.kind == "f":
                params[where[0]][where[1]] = {"nan": lambda: np.full_like(array, np.nan),
                                              "inf": lambda: np.full_like(array, np.inf),
                                              "str": lambda: array.astype(str), "int": lambda: array.astype(np.int64),
                                              "scalar": lambda: np.float32(1.0)}[value]()
    np.save(path, np.array([config, params], dtype=object), allow_pickle=True)
    kind, arg = damage
    data = path.read_bytes()
    if kind == "truncate":
        path.write_bytes(data[: int(arg * len(data))])
    elif kind == "flip":
        i = arg % len(data)
        path.write_bytes(data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:])
    elif kind == "bytes":
        path.write_bytes(arg)


@SETTINGS
@given(PORT_EDITS, FILE_DAMAGE)
def test_import_haiku_recall_refuses_every_damaged_port_file(place, edits, damage):
    i = next(_ids)
    path = place.parent / f"port-{i}.npy"
    _write_port(path, edits, damage)
    out = str(place.parent / f"out-{i}")
    before = set(os.listdir(place))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["--threads", "1", "import", "haiku-recall", str(path), "--out", out])
    text = err.getvalue()
    if code == 0:  # an edit the import does not read (an unused config key): it imported; nothing to refuse
        CASES["import haiku-recall (imported: edit not read)"] += 1
        return
    lines = [line for line in text.splitlines() if line.strip()]
    assert code in (1, 2) and len(lines) == 1 and "Traceback" not in text, (edits, damage, code, text)
    assert not os.path.exists(out), (edits, damage, "left", out)
    assert set(os.listdir(place)) == before
    CASES["import haiku-recall"] += 1
    LINES["import haiku-recall"].add(_normalise(lines[0]))


# ---------------------------------------------------------------------- hf (a GPT-2 folder)

HF_CONFIG = {"model_type": "gpt2", "activation_function": "gelu_new", "n_embd": 8, "n_layer": 1, "n_head": 2,
             "n_positions": 6, "vocab_size": 5, "layer_norm_epsilon": 1e-5}


def _safetensors_header(tensors: dict) -> bytes:
    """A safetensors file whose header declares ``tensors`` (name -> shape), with 8 bytes of data."""
    header = {name: {"dtype": "F32", "shape": list(shape), "data_offsets": [0, 8]} for name, shape in tensors.items()}
    raw = json.dumps(header).encode()
    return len(raw).to_bytes(8, "little") + raw + b"\0" * 8


HF_CASES = st.one_of(
    st.tuples(st.just("config field"), st.sampled_from(sorted(HF_CONFIG) + ["n_inner"]), BAD),
    st.tuples(st.just("config text"), st.sampled_from(["", "{", "[]", "1", "null", '"x"', "{\"n_embd\": }"]), st.none()),
    st.tuples(st.just("weights"), st.sampled_from(["garbage", "empty", "huge", "missing", "wrong names", "bin garbage"]),
              st.none()),
    st.tuples(st.just("big"), st.sampled_from(["n_embd", "n_layer", "vocab_size", "n_positions", "n_inner"]),
              st.sampled_from([200_000, 10**9, 2**40])),
)


@SETTINGS
@given(HF_CASES)
def test_import_hf_refuses_every_damaged_folder(place, case):
    what, field, value = case
    i = next(_ids)
    folder = place.parent / f"hf-{i}"
    folder.mkdir()
    config = dict(HF_CONFIG)
    text = None
    if what == "config field":
        config[field] = value
    elif what == "config text":
        text = field
    elif what == "big":
        config[field] = value
    (folder / "config.json").write_text(text if text is not None else json.dumps(config))
    weights = "huge" if what == "big" else (field if what == "weights" else "wrong names")
    if weights == "garbage":
        (folder / "model.safetensors").write_bytes(b"\x07" * 40)
    elif weights == "empty":
        (folder / "model.safetensors").write_bytes(b"")
    elif weights == "huge":
        (folder / "model.safetensors").write_bytes(_safetensors_header({"wte.weight": (200_000, 200_000)}))
    elif weights == "wrong names":
        (folder / "model.safetensors").write_bytes(_safetensors_header({"nothing": (2,)}))
    elif weights == "bin garbage":
        (folder / "pytorch_model.bin").write_bytes(b"PK\x03\x04" + b"\x00" * 30)
    out = str(place.parent / f"out-{i}")
    _run(place, ["import", "hf", str(folder), "--task", "sort", "--task-config", '{"length": 2, "vocab": 4}',
                 "--out", out], out)


# ---------------------------------------------------------------------- bridge and --model (the user's function)

def _recurse():
    return _recurse()


class _NotAModel:
    cfg = None


def _functions() -> dict:
    from interp_rand.tasks import make_task

    task = make_task("sort", length=3, vocab=4)
    return {
        "raises": lambda: (_ for _ in ()).throw(RuntimeError("boom")),
        "raises_keyerror": lambda: {}["missing"],
        "recurses": _recurse,
        "exits0": lambda: sys.exit(0),
        "exits_text": lambda: sys.exit("bye"),
        "debugger": lambda: breakpoint(),
        "returns_none": lambda: None,
        "returns_int": lambda: 7,
        "returns_text": lambda: "model",
        "returns_short": lambda: (1,),
        "returns_long": lambda: (1, 2, 3, 4),
        "returns_not_model": lambda: (_NotAModel(), task),
        "returns_no_task": lambda: (_model(), None),
        "returns_bad_task": lambda: (_model(), 3),
        "returns_bad_seed_source": lambda: (_model(), task, "sometimes"),
        "returns_generator": lambda: (x for x in ()),
        "not_callable": 5,
    }


_MODEL = []


def _model():
    if not _MODEL:
        from interp_rand import HookedTransformer, make_task

        _MODEL.append(HookedTransformer(make_task("sort", length=3, vocab=4).model_config(d_model=8, n_heads=1)))
    return _MODEL[0]


@pytest.fixture(scope="module")
def user_module(place):
    module = types.ModuleType("ir_property_user")
    for name, fn in _functions().items():
        setattr(module, name, fn)
    sys.modules["ir_property_user"] = module
    (place.parent / "broken_user.py").write_text("raise RuntimeError('import-time failure')\n")
    (place.parent / "syntax_user.py").write_text("def f(:\n")
    yield module
    sys.modules.pop("ir_property_user", None)


TARGETS = st.one_of(
    st.sampled_from(sorted(_functions())).map(lambda name: f"ir_property_user:{name}"),
    st.sampled_from(["", ":", "a:", ":b", "a:b:c", "no_such_module_xyz:f", "os:no_such_function", "os:system",
                     "builtins:exit", "time:sleep", "json:loads", "missing_file.py:f", "PARENT/broken_user.py:f",
                     "PARENT/syntax_user.py:f", "ir_property_user:not-an-identifier", "..:f", "os.path:join"]),
)
COMMANDS = st.sampled_from([["eval", "--out", "eval-out"], ["report", "--out", "report.html"], ["circuit", "--out", "circuit"],
                            ["randomness", "--out", "randomness"], ["import-bridge"]])
TASK_CONFIGS = st.one_of(st.sampled_from(["", "{", "[1,2]", "null", "7", '"x"', '{"nope": 1}', '{"length": -1}',
                                          '{"length": 1000000000000}', '{"vocab": "x"}', '{"length": [3]}']),
                         st.none())


@SETTINGS
@given(TARGETS, COMMANDS, TASK_CONFIGS)
def test_every_bad_user_function_is_refused_in_one_line_naming_it(place, user_module, target, command, task_config):
    target = target.replace("PARENT", str(place.parent))
    i = next(_ids)
    if command == ["import-bridge"]:
        out = str(place.parent / f"out-{i}")
        argv = ["import", "bridge", target, "--task", "sort", "--out", out]
        if task_config is not None:
            argv += ["--task-config", task_config]
        _run(place, argv, out)
    else:
        _run(place, [*command[:1], "--model", target, *command[1:]])


def _bridge():
    from transformer_lens import TransformerBridgeConfig
    from transformer_lens.model_bridge import TransformerBridge

    cfg = TransformerBridgeConfig(d_model=16, d_head=4, n_heads=4, n_layers=1, n_ctx=6, d_vocab=5, d_vocab_out=5,
                                  act_fn="gelu", normalization_type="LN", positional_embedding_type="standard", seed=3)
    return TransformerBridge.boot_native(cfg).eval()


BAD_TASK_CONFIGS = st.one_of(
    st.sampled_from(["", "{", "[1,2]", "null", "7", '"x"', "NaN", '{"nope": 1}', '{"length": 3, "vocab": 9}']),
    st.fixed_dictionaries({"length": BAD, "vocab": st.one_of(BAD, st.integers(-5, 12))}).map(
        lambda d: json.dumps(d, default=str)),
)


@SETTINGS
@given(BAD_TASK_CONFIGS, st.sampled_from(["sort", "addition", "", "nope", "recall"]))
def test_import_bridge_refuses_every_task_config_the_model_does_not_fit(place, user_module, task_config, task):
    """A real TransformerBridge (sort's sizes: length 3 over 4 values, n_ctx 6, d_vocab 5), with
    task options it does not fit, or that are not options at all."""
    if not hasattr(user_module, "returns_bridge"):
        bridge = _bridge()
        user_module.returns_bridge = lambda: bridge
    i = next(_ids)
    out = str(place.parent / f"out-{i}")
    _run(place, ["import", "bridge", "ir_property_user:returns_bridge", "--task", task, "--task-config", task_config,
                 "--out", out], out)


def test_the_property_tests_counts():
    """Run after the property tests (file order): how many cases each saw and how many distinct
    error lines (paths and numbers aside) they were refused with, printed for the record."""
    if not {"--model", "import hf", "import haiku-recall"} <= set(CASES):  # pytest-xdist spreads the file over workers
        pytest.skip("run in one process with every property test (pytest -p no:xdist -s)")
    print(f"\nimport/--model property test: {sum(CASES.values())} cases: {dict(CASES)}; distinct error lines: "
          + ", ".join(f"{k} {len(v)}" for k, v in LINES.items()))
    assert CASES["--model"] > 0 and CASES["import hf"] > 0 and CASES["import haiku-recall"] > 0
    if os.environ.get("IMPORT_PROPERTY_LINES"):  # every distinct line, for reading them
        for kind, lines in LINES.items():
            print(f"-- {kind}", *sorted(lines), sep="\n")
