"""``interp-rand explain``: a model and a TaskSpec from a Python file the user names, the files
written, and bad input refused before any work."""

import json

from interp_rand.cli.main import main

USER_FILE = '''
import torch
from interp_rand.model import HookedTransformer, ModelConfig
from interp_rand.tasks import Batch, TaskSpec

L, V = 4, 6


def sample(n, generator):  # reverse a list: x_1 .. x_L SEP y_1 .. y_L
    x = torch.randint(0, V, (n, L), generator=generator)
    seq = torch.cat([x, torch.full((n, 1), V), x.flip(1)], 1)
    mask = torch.zeros(n, 2 * L, dtype=torch.bool)
    mask[:, L:] = True
    return Batch(seq[:, :-1], seq[:, 1:], mask, torch.arange(L, 2 * L))


TASK = TaskSpec("reverse", sample, [f"p{i}" for i in range(2 * L)])


def build():
    torch.manual_seed(0)
    cfg = ModelConfig(d_model=16, n_layers=1, n_heads=2, d_head=8, n_ctx=2 * L, d_vocab=V + 1, d_vocab_out=V + 1,
                      d_mlp=32)
    return HookedTransformer(cfg).eval(), TASK
'''


def test_explain_reads_a_model_and_task_from_a_python_file(tmp_path, capsys):
    user = tmp_path / "my_reverse.py"
    user.write_text(USER_FILE)
    out = tmp_path / "explain"
    assert main(["--threads", "1", "explain", "--model", f"{user}:build", "--out", str(out), "--n", "200",
                 "--max-candidates", "1"]) == 0
    printed = capsys.readouterr().out
    # an untrained model matches no candidate: the answer says so and names the best partial one
    assert "no candidate reaches match 0.9; best partial" in printed
    data = json.loads((out / "explain.json").read_text())
    assert data["verdict"] == "fails" and (out / "explain.html").is_file()
    assert any(c["candidate"] == "reverse_source" for c in data["candidates"])


def test_explain_refuses_bad_input_before_work(tmp_path, capsys):
    assert main(["explain", "zoo:sort", "--families", "order,nope", "--out", str(tmp_path / "a")]) == 2
    assert "unknown ['nope']; the library has: order, search, copy, count, digits, position" in capsys.readouterr().err
    assert main(["explain", "--out", str(tmp_path / "b")]) == 2
    assert "give RUN_DIR or --model" in capsys.readouterr().err
    assert main(["explain", "--model", str(tmp_path / "missing.py") + ":build", "--out", str(tmp_path / "c")]) == 2
    assert "no file" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()


def test_a_run_that_does_not_exist_is_refused_before_the_heavy_imports(tmp_path):
    """Every command's run argument is checked before the command runs: one line, exit 2, in a
    fraction of a second (torch is never imported)."""
    import subprocess
    import sys
    import time

    code = ("import sys; from interp_rand.cli.main import main; rc = main(['eval', '/no/such/run']); "
            "assert 'torch' not in sys.modules; sys.exit(rc)")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2 and time.perf_counter() - start < 5
    assert "RUN_DIR /no/such/run does not exist (a run folder, or zoo:NAME)" in done.stderr
