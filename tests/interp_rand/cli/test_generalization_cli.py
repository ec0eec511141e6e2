"""``interp-rand generalization``: a zoo model's lengths (the files, the learned table's limit in
the text), a task with no length refused in one line before any folder is written."""

import json

from interp_rand.cli.main import main


def test_generalization_writes_its_files_and_says_where_the_table_stops(tmp_path, capsys):
    out = tmp_path / "gen"
    assert main(["--threads", "1", "generalization", "zoo:sort", "--lengths", "4-6", "--n", "64", "--no-mechanism", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "cannot run past length 5" in text and "n_ctx=10" in text
    found = json.loads((out / "generalization.json").read_text())
    assert found["trained"] == [5, 5] and found["extrapolation_factor"] == 1.0
    assert [s["length"] for s in found["scores"]] == [4, 5, 6] and found["scores"][2]["exact_match"] is None
    assert "extrapolation factor 1.00" in (out / "generalization.html").read_text()


def test_a_task_without_a_length_and_bad_lengths_are_refused_before_any_folder(tmp_path, capsys):
    out = tmp_path / "gen"
    assert main(["--threads", "1", "generalization", "zoo:gridworld-Aq_R", "--out", str(out)]) == 2
    assert "gridworld" in capsys.readouterr().err
    assert main(["--threads", "1", "generalization", "zoo:sort", "--lengths", "9-3", "--out", str(out)]) == 2
    assert "A-B" in capsys.readouterr().err
    assert not out.exists()
