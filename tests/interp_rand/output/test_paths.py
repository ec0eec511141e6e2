"""An output path checked once, before any work: resolved against the package folders (a
default path too), and an existing file, a dangling link or a link loop refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

import circuits
from interp_rand.output import OutputError, check_output

CIRCUITS = Path(circuits.__file__).parent.resolve()


def one_line(err) -> str:
    message = str(err.value)
    assert "\n" not in message
    return message


def test_a_new_or_existing_folder_is_accepted(tmp_path):
    assert check_output(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    assert check_output(tmp_path) == tmp_path
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")  # a link to a folder is that folder
    assert check_output(tmp_path / "link") == tmp_path / "link"
    assert check_output(tmp_path / "report.html", "file") == tmp_path / "report.html"


def test_an_existing_file_a_dangling_link_and_a_loop_are_refused(tmp_path):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    with pytest.raises(OutputError) as err:
        check_output(tmp_path / "afile")
    assert one_line(err).endswith("afile exists and is not a folder; give a folder (new or existing)")
    with pytest.raises(OutputError) as err:
        check_output(tmp_path / "dangling")
    assert "is a dangling symbolic link (to " in one_line(err)
    with pytest.raises(OutputError) as err:
        check_output(tmp_path / "loop1")
    assert "is a symbolic link loop" in one_line(err)
    with pytest.raises(OutputError, match="cannot be reached"):
        check_output(tmp_path / "dangling" / "sub")
    with pytest.raises(OutputError, match="afile is a file, not a folder"):
        check_output(tmp_path / "afile" / "sub")


def test_a_file_output_is_never_a_folder_or_a_link(tmp_path):
    (tmp_path / "t.html").write_text("x")
    (tmp_path / "link.html").symlink_to(tmp_path / "t.html")
    with pytest.raises(OutputError, match="is a folder; give a file name"):
        check_output(tmp_path, "file")
    with pytest.raises(OutputError, match="link.html is a symbolic link .*refusing to write through it: remove"):
        check_output(tmp_path / "link.html", "file")


def test_a_relative_default_path_is_resolved_against_the_packages(monkeypatch):
    # the issue: the default --out used from inside circuits/ landed in circuits/runs/ (hidden by .gitignore)
    monkeypatch.chdir(CIRCUITS)
    with pytest.raises(OutputError) as err:
        check_output(Path("runs") / "sort")
    assert "inside the installed package folder 'circuits'" in one_line(err)
    assert not (CIRCUITS / "runs" / "sort").exists()
