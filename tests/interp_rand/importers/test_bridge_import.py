"""A TransformerBridge back to our model (``from_bridge``, the ``bridge`` importer and
``interp-rand import``): logits equal, provenance recorded, bad input refused in one line."""

import json
import sys
import types

import pytest
import torch

from interp_rand.cli.main import main
from interp_rand.importers import import_model
from interp_rand.model import HookedTransformer, ModelConfig
from interp_rand.model.bridge import from_bridge, to_bridge
from interp_rand.training.checkpoint import load_checkpoint


def _bridge():
    from transformer_lens import TransformerBridgeConfig
    from transformer_lens.model_bridge import TransformerBridge

    cfg = TransformerBridgeConfig(d_model=16, d_head=4, n_heads=4, n_layers=2, n_ctx=7, d_vocab=10, d_vocab_out=10,
                                  act_fn="gelu", normalization_type="LN", positional_embedding_type="standard", seed=3)
    bridge = TransformerBridge.boot_native(cfg)
    with torch.no_grad():  # non-trivial biases and LayerNorm weights
        for p in bridge.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    return bridge.eval()


def test_from_bridge_logits_equal_and_round_trip():
    bridge = _bridge()
    model = from_bridge(bridge)
    tokens = torch.randint(0, 10, (4, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert (model(tokens) - bridge(tokens)).abs().max() < 1e-5
        again = from_bridge(to_bridge(model))
        assert torch.equal(again(tokens), model(tokens))


def test_bridge_importer_writes_a_run_folder(tmp_path, capsys, monkeypatch):
    module = types.ModuleType("byom_test_models")
    module.build = _bridge
    monkeypatch.setitem(sys.modules, "byom_test_models", module)
    argv = ["--threads", "1", "import", "bridge", "byom_test_models:build", "--task", "sort"]
    assert main(argv + ["--out", str(tmp_path / "run"), "--task-config", '{"length": 3, "vocab": 9}']) == 0
    capsys.readouterr()
    ckpt = load_checkpoint(tmp_path / "run")
    meta = json.loads((ckpt.path / "checkpoint.json").read_text())
    assert meta["provenance"] == {"importer": "bridge", "source": "byom_test_models:build",
                                  "bridge_class": "TransformerBridge"}
    tokens = ckpt.spec.make_task().sample(8, torch.Generator().manual_seed(0)).inputs
    with torch.no_grad():
        assert torch.equal(ckpt.model()(tokens), from_bridge(_bridge())(tokens))
    # a task whose vocabulary the model does not have is refused, naming the field
    assert main(argv + ["--out", str(tmp_path / "small"), "--task-config", '{"length": 3, "vocab": 4}']) == 2
    assert "does not fit task 'sort': d_vocab=10 (task 'sort' needs 5)" in capsys.readouterr().err
    assert main(["--threads", "1", "import", "bridge", "byom_test_models:build", "--out", str(tmp_path / "x"),
                 "--task", "nope"]) == 2
    assert "a run folder needs a registered task" in capsys.readouterr().err
    assert main(["--threads", "1", "import", "haiku-recall", "x.npy", "--out", str(tmp_path / "y"), "--task", "sort"]) == 2
    assert "--task is not an option of 'haiku-recall'" in capsys.readouterr().err


@pytest.mark.parametrize("body, said", [
    ("raise KeyError('weights')", "mine:build raised KeyError: 'weights'"),
    ("return build()", "mine:build recursed without end"),
    ("import sys; sys.exit(0)", "mine:build called sys.exit(0) instead of returning"),
    ("breakpoint()", "it called breakpoint(), which would wait for a debugger"),
])
def test_a_user_function_that_goes_wrong_is_one_line_naming_it(body, said, tmp_path, capsys, monkeypatch):
    """``--model`` and ``import bridge`` call the user's function: an exception, endless
    recursion, ``sys.exit(0)`` or a ``breakpoint()`` is one error line naming the function, exit 2,
    nothing written."""
    (tmp_path / "mine.py").write_text(f"def build():\n    {body}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "mine", raising=False)
    out = tmp_path / "out"
    assert main(["--threads", "1", "eval", "--model", "mine:build", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and not out.exists()


def test_compare_refuses_two_models_of_different_tasks(tmp_path, capsys, monkeypatch):
    """``compare --model-a A --model-b B`` where B solves another task: refused in one line,
    not silently compared on A's task."""
    (tmp_path / "two.py").write_text(
        "from interp_rand import HookedTransformer, make_task\n"
        "def _of(task):\n"
        "    return HookedTransformer(task.model_config(d_model=16, n_layers=1, n_heads=2)), task\n"
        "def a():\n    return _of(make_task('sort', length=4, vocab=6))\n"
        "def b():\n    return _of(make_task('sort', length=5, vocab=6))\n")
    monkeypatch.chdir(tmp_path)
    assert main(["--threads", "1", "compare", "--model-a", "two:a", "--model-b", "two:b", "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "--model-a solves 'sort'" in err and "compare needs two models of one task" in err


def test_import_bridge_refuses_a_non_bridge_and_a_task_config_that_is_not_an_object(tmp_path, capsys, monkeypatch):
    module = types.ModuleType("byom_not_bridges")
    module.build = _bridge
    module.plain = lambda: torch.nn.Linear(2, 2)
    monkeypatch.setitem(sys.modules, "byom_not_bridges", module)
    argv = ["--threads", "1", "import", "bridge", "--task", "sort"]
    assert main(argv + ["byom_not_bridges:plain", "--out", str(tmp_path / "a")]) == 2
    assert "must return a TransformerBridge, got Linear" in capsys.readouterr().err
    assert main(argv + ["byom_not_bridges:build", "--out", str(tmp_path / "b"), "--task-config", "[1, 2]"]) == 2
    assert "--task-config must be a JSON object" in capsys.readouterr().err
    assert main(argv + ["os:system", "--out", str(tmp_path / "c")]) == 2
    assert "os:system raised TypeError" in capsys.readouterr().err
    assert not any((tmp_path / x).exists() for x in "abc")
