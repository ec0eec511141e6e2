"""One file written one way: atomic, never through a symbolic link, with the user's umask, JSON
strict; a full disk mid-write leaves the earlier file whole."""

from __future__ import annotations

import errno
import json
import os
import stat

import pytest
from faults import fill_disk_after

from interp_rand.output import OutputError, append_line, json_text, write_json, write_text
from interp_rand.output.files import NULLED_KEY, strict_json
from interp_rand.output.write_error import RunWriteError


def test_a_file_is_written_whole_and_replaces_the_old_one(tmp_path):
    path = write_text(tmp_path / "a.json", "old")
    write_text(path, "new")
    assert path.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]  # no temporary file left


def test_a_symlinked_output_file_is_refused_and_its_target_untouched(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    link = tmp_path / "eval.json"
    link.symlink_to(target)
    with pytest.raises(OutputError, match=r"eval.json is a symbolic link \(to .*precious.txt\); refusing") as err:
        write_json(link, {"x": 1})
    assert "\n" not in str(err.value)
    assert target.read_text() == "keep me" and link.is_symlink()
    with pytest.raises(OutputError, match="symbolic link"):
        append_line(link, "{}")
    assert target.read_text() == "keep me"


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_the_users_umask_is_respected(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        append_line(tmp_path / "c.jsonl", "{}")
        written = [write_text(tmp_path / "a.txt", "x"), write_json(tmp_path / "b.json", {}), tmp_path / "c.jsonl"]
    finally:
        os.umask(old)
    assert [stat.S_IMODE(p.stat().st_mode) for p in written] == [mode] * 3  # never mkstemp's 0600


def test_json_is_strict_and_says_what_was_nulled(tmp_path):
    data = {"threshold": float("nan"), "curve": [{"recovered": 1.0}, {"recovered": float("inf")}], "n": 3}
    text = json_text(data)
    loaded = json.loads(text)  # strict: no NaN token anywhere
    assert "NaN" not in text and "Infinity" not in text
    assert loaded["threshold"] is None and loaded["curve"][1]["recovered"] is None and loaded["n"] == 3
    assert loaded[NULLED_KEY] == ["threshold", "curve[1].recovered"]
    assert NULLED_KEY not in json.loads(json_text({"a": 1.5}))  # nothing nulled, no note
    assert strict_json([float("-inf"), 2])[0] == [None, 2]
    assert json.loads(write_json(tmp_path / "x.json", data).read_text()) == loaded


def test_a_full_disk_mid_write_leaves_the_earlier_file_whole(tmp_path, monkeypatch):
    earlier = write_json(tmp_path / "card.json", {"verdict": "supported", "claims": list(range(5000))})
    before = earlier.read_bytes()
    fill_disk_after(monkeypatch, 8192)  # the case: the new file gets 8,192 bytes, then the disk is full
    with pytest.raises(RunWriteError, match=r"could not write the file .*card.json: No space left on device \(ENOSPC\)"
                       r"; an earlier file there is untouched") as err:
        write_json(earlier, {"verdict": "other", "claims": list(range(9000))})
    monkeypatch.undo()
    assert err.value.errno == errno.ENOSPC and "\n" not in str(err.value)
    assert earlier.read_bytes() == before  # byte for byte
    assert sorted(p.name for p in tmp_path.iterdir()) == ["card.json"]  # the partial temporary file removed
