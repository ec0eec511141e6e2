"""A GPT-2-style Hugging Face folder on disk read as our model (``interp-rand import hf``): the
logits equal ``transformers``' own forward and TransformerLens's ``boot_transformers`` bridge,
the run folder loads, and folders that are not GPT-2 checkpoints are refused in one line."""

import json

import pytest
import torch

from interp_rand.cli.main import main
from interp_rand.importers.hf_gpt2 import read_gpt2
from interp_rand.training.checkpoint import load_checkpoint


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=11, n_positions=10, n_embd=32, n_layer=2, n_head=4)
    model = GPT2LMHeadModel(cfg)
    with torch.no_grad():  # weights well away from the initialisation's near-zero biases
        for p in model.parameters():
            p.add_(0.2 * torch.randn(p.shape))
    folder = tmp_path_factory.mktemp("gpt2")
    model.eval().save_pretrained(folder)
    return folder, model


def test_our_reading_computes_what_transformers_computes(gpt2_folder):
    folder, hf = gpt2_folder
    ours = read_gpt2(folder)  # also checked against TransformerLens's bridge inside
    tokens = torch.randint(0, 11, (6, 10), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert (ours(tokens) - hf(tokens).logits).abs().max() < 1e-4
    assert ours.cfg.act_fn == "gelu_new" and ours.cfg.n_heads == 4 and ours.cfg.d_head == 8


def test_import_hf_writes_a_run_folder_and_refuses_what_is_not_gpt2(gpt2_folder, tmp_path, capsys):
    folder, hf = gpt2_folder
    argv = ["--threads", "1", "import", "hf", str(folder), "--task", "sort"]
    assert main(argv + ["--out", str(tmp_path / "run"), "--task-config", '{"length": 5, "vocab": 10}']) == 0
    capsys.readouterr()
    ckpt = load_checkpoint(tmp_path / "run")
    meta = json.loads((ckpt.path / "checkpoint.json").read_text())
    assert meta["provenance"]["importer"] == "hf" and len(meta["provenance"]["source_sha256"]) == 64
    tokens = ckpt.spec.make_task().sample(4, torch.Generator().manual_seed(0)).inputs
    with torch.no_grad():
        assert (ckpt.model()(tokens) - hf(tokens).logits).abs().max() < 1e-4
    # a task the model's vocabulary cannot hold
    assert main(argv + ["--out", str(tmp_path / "big"), "--task-config", '{"length": 5, "vocab": 30}']) == 2
    assert "does not fit task 'sort'" in capsys.readouterr().err
    assert not (tmp_path / "big").exists()
    # not a model folder; another architecture
    assert main(["import", "hf", str(tmp_path / "none"), "--out", str(tmp_path / "x"), "--task", "sort"]) == 2
    assert "is not a folder" in capsys.readouterr().err
    other = tmp_path / "llama"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "llama", "n_embd": 8}))
    assert main(["import", "hf", str(other), "--out", str(tmp_path / "y"), "--task", "sort"]) == 2
    assert "only GPT-2-style checkpoints are read; model_type='llama'" in capsys.readouterr().err


def test_an_import_that_fails_leaves_no_folder_and_nan_weights_are_refused(gpt2_folder, tmp_path, monkeypatch):
    """NaN weights are refused before anything is written; a failure while writing removes the
    folder it created, so the retry is not refused as 'not empty'."""
    import interp_rand.importers.run as run_module
    from interp_rand.importers import import_model
    from interp_rand.model import HookedTransformer

    folder, _ = gpt2_folder
    real = read_gpt2(folder)
    broken = HookedTransformer(real.cfg)
    broken.load_state_dict(real.state_dict())
    with torch.no_grad():
        broken.unembed.W_U[0, 0] = float("nan")
    monkeypatch.setattr("interp_rand.importers.hf_gpt2.read_gpt2", lambda source: broken)
    with pytest.raises(ValueError, match="NaN or infinite values in \\['unembed.W_U'\\]; nothing was written"):
        import_model("hf", str(folder), tmp_path / "nan", task="sort", task_config='{"length": 5, "vocab": 10}')
    assert not (tmp_path / "nan").exists()
    monkeypatch.setattr("interp_rand.importers.hf_gpt2.read_gpt2", lambda source: real)

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(run_module, "write_json", full_disk)
    with pytest.raises(OSError, match="No space left"):
        import_model("hf", str(folder), tmp_path / "full", task="sort", task_config='{"length": 5, "vocab": 10}')
    assert not (tmp_path / "full").exists()
    monkeypatch.undo()
    import_model("hf", str(folder), tmp_path / "full", task="sort", task_config='{"length": 5, "vocab": 10}')
    assert (tmp_path / "full" / "checkpoints").is_dir()  # the retry is not refused
