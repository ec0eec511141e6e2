"""An output folder's files replaced together or not at all, by one writer: a failure mid-way
(a full disk, Ctrl-C) leaves the earlier files byte for byte; a writer killed after its commit
record is finished by the next; a claim refuses links and a second writer before any work."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from faults import fill_disk_after

from interp_rand.output import claim, replace_files, session, write_json, write_text
from interp_rand.output.files import folder_mode, json_text
from interp_rand.output.folder import (COMMIT_FILE, OLD_PREFIX, STAGE_PREFIX, kept, recover, recover_folders,
                                       replace_folder)
from interp_rand.output.lock import LOCK_FILE, RunLocked, run_lock
from interp_rand.output.paths import OutputError
from interp_rand.output.write_error import RunWriteError

FILES = ("circuit.json", "circuit.html", "card.json", "card.html")


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != LOCK_FILE}


def write_output(folder: Path, tag: str, card: bool = True, fail_after: str | None = None) -> None:
    with replace_files(folder, FILES) as stage:
        for name in FILES:
            if name.startswith("card") and not card:
                continue
            if name == fail_after:
                raise KeyboardInterrupt  # Ctrl-C in the middle of the writes
            write_text(stage / name, f"{tag} {name} " + "x" * 3000)


def test_the_files_are_replaced_together(tmp_path):
    write_output(tmp_path, "run1")
    write_output(tmp_path, "run2")
    assert {name: data.split()[0] for name, data in snapshot(tmp_path).items()} == dict.fromkeys(FILES, b"run2")


def test_files_of_the_set_not_written_again_are_removed(tmp_path):
    # an old card.json never stays beside a circuit.json made without a card
    write_output(tmp_path, "run1")
    write_output(tmp_path, "run2", card=False)
    assert sorted(snapshot(tmp_path)) == ["circuit.html", "circuit.json"]


def test_a_failure_mid_way_leaves_the_earlier_folder_intact(tmp_path):
    write_output(tmp_path, "run1")
    (tmp_path / "notes.txt").write_text("the user's own file")
    before = snapshot(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        write_output(tmp_path, "run2", fail_after="card.json")  # circuit.json, .html staged, then Ctrl-C
    assert snapshot(tmp_path) == before


def test_a_full_disk_mid_write_leaves_card_and_circuit_files_byte_for_byte(tmp_path, monkeypatch):
    write_output(tmp_path, "run1")
    before = snapshot(tmp_path)
    fill_disk_after(monkeypatch, 4000)  # the first staged file fits, the second fills the disk
    with pytest.raises(RunWriteError) as err:
        write_output(tmp_path, "run2")
    monkeypatch.undo()
    assert str(err.value) == (f"could not write the file {tmp_path / 'circuit.html'}: No space left on device (ENOSPC); "
                              "the earlier files there are untouched")  # the file named as the user knows it
    assert snapshot(tmp_path) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]  # the staging folder removed


def test_a_writer_killed_after_its_commit_record_is_finished_by_the_next(tmp_path, capsys):
    write_output(tmp_path, "run1")
    stage = tmp_path / f"{STAGE_PREFIX}killed"  # what a kill -9 between two renames leaves
    stage.mkdir()
    for name in ("circuit.html", "card.json"):  # circuit.json was renamed already
        (stage / name).write_text(f"run2 {name}")
    (tmp_path / "circuit.json").write_text("run2 circuit.json")
    write_text(stage / COMMIT_FILE, json_text({"rename": ["card.json", "circuit.html", "circuit.json"],
                                               "remove": ["card.html"]}))
    torn = tmp_path / f"{STAGE_PREFIX}torn"  # a write killed before its record: dropped
    torn.mkdir()
    (torn / "circuit.json").write_text("half")
    with run_lock(tmp_path):
        recover(tmp_path)
    assert "finished an interrupted write of card.json, circuit.html, circuit.json" in capsys.readouterr().err
    assert {n: d.decode() for n, d in snapshot(tmp_path).items()} == {
        "card.json": "run2 card.json", "circuit.html": "run2 circuit.html", "circuit.json": "run2 circuit.json"}


def test_a_claim_refuses_a_linked_output_file_before_any_work(tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_text("the target")
    out = tmp_path / "out"
    out.mkdir()
    (out / "card.json").symlink_to(target)
    with session(), pytest.raises(OutputError, match=r"card.json is a symbolic link \(to .*elsewhere.json\)"):
        claim(out, FILES)
    assert target.read_text() == "the target"


def test_a_second_writer_of_a_folder_is_refused_in_one_line(tmp_path):
    with run_lock(tmp_path / "out", command="interp-rand circuit zoo:sort --out out"):
        with session(), pytest.raises(RunLocked) as err:
            claim(tmp_path / "out", FILES)
    message = str(err.value)
    assert "is in use by another writer" in message and "(interp-rand circuit zoo:sort --out out)" in message
    assert "\n" not in message


def test_a_claim_is_released_with_its_session_and_an_unused_folder_removed(tmp_path):
    with session():
        claim(tmp_path / "new", FILES)
        assert (tmp_path / "new" / LOCK_FILE).exists()
        assert kept() == (f"no circuit.json, circuit.html, card.json, card.html written to {tmp_path / 'new'} "
                          "(what was there is unchanged)")
    assert not (tmp_path / "new").exists()  # a refused or interrupted command leaves no empty folder
    with session():
        claim(tmp_path / "used", FILES, keeps="the runs under used are kept")
        write_output(tmp_path / "used", "run1")  # the library's write re-enters the claim's lock
        assert kept() == (f"{tmp_path / 'used'}: card.html, card.json, circuit.html, circuit.json written whole; "
                          "the runs under used are kept")
    with run_lock(tmp_path / "used", notify=pytest.fail):  # released cleanly
        pass


def test_only_the_outputs_files_may_be_staged(tmp_path):
    with pytest.raises(ValueError, match=r"\['other.json'\] are not files of this output"):
        with replace_files(tmp_path, FILES) as stage:
            write_json(stage / "other.json", {})
    assert os.listdir(tmp_path) == []  # nothing staged is left, and the released lock is gone


def test_a_whole_folder_is_replaced_or_left_and_a_killed_swap_is_undone(tmp_path):
    final = tmp_path / "step_0000010"
    with replace_folder(final) as new:
        write_text(new / "model.safetensors", "one")
    assert stat.S_IMODE(final.stat().st_mode) == folder_mode() != 0o700  # not mkdtemp's mode
    with pytest.raises(KeyboardInterrupt), replace_folder(final) as new:
        write_text(new / "model.safetensors", "two")
        raise KeyboardInterrupt
    assert (final / "model.safetensors").read_text() == "one" and sorted(os.listdir(tmp_path)) == [final.name]
    final.rename(tmp_path / f"{OLD_PREFIX}{final.name}")  # a writer killed between its two renames
    (tmp_path / ".tmp-step_0000010-half").mkdir()  # and a half-filled new one
    recover(tmp_path)  # the staged-files recovery leaves an old folder alone: it is the good copy
    recover_folders(tmp_path)
    assert os.listdir(tmp_path) == [final.name] and (final / "model.safetensors").read_text() == "one"
