"""``--out`` is refused inside the installed package folders, by every command that takes it,
with one line and before any work; any other folder is accepted."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

import circuits
import interp_rand
import probes
from interp_rand.cli.main import build_parser, main
from interp_rand.cli.options import output_file, output_path, package_folders

PACKAGE_DIRS = {name: Path(m.__file__).parent.resolve() for name, m in
                (("interp_rand", interp_rand), ("circuits", circuits), ("probes", probes))}


def test_the_package_folders_are_the_imported_ones():
    assert package_folders() == PACKAGE_DIRS


@pytest.mark.parametrize("name", sorted(PACKAGE_DIRS))
def test_a_folder_inside_a_package_is_refused(name):
    with pytest.raises(argparse.ArgumentTypeError, match=f"inside the installed package folder '{name}'"):
        output_path(str(PACKAGE_DIRS[name] / "sort"))
    with pytest.raises(argparse.ArgumentTypeError, match="e.g. --out out/"):
        output_path(str(PACKAGE_DIRS[name]))


def test_other_folders_are_accepted(tmp_path, monkeypatch):
    assert output_path(str(tmp_path / "circuits" / "sort")) == tmp_path / "circuits" / "sort"
    monkeypatch.chdir(tmp_path)  # a relative circuits/ that is not the package is fine
    assert output_path("circuits/sort") == Path("circuits/sort")


def _out_actions(parser: argparse.ArgumentParser, path=()):
    for action in parser._actions:
        if "--out" in action.option_strings:
            yield path, action
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _out_actions(sub, (*path, name))


def test_every_out_option_uses_the_check():
    found = list(_out_actions(build_parser()))
    assert len(found) >= 14  # train (per task), eval, circuit, compare, case-study, report, ...
    checked = (output_path, output_file)  # a folder or, for report and curve, one file
    assert all(action.type in checked for _, action in found), [p for p, a in found if a.type not in checked]
    assert {p[0] for p, a in found if a.type is output_file} == {"report", "curve"}


def test_the_cli_refuses_with_one_line_before_any_work(capsys):
    target = PACKAGE_DIRS["circuits"] / "sort"
    with pytest.raises(SystemExit) as exit_info:
        main(["circuit", "zoo:sort", "--method", "eap-ig", "--out", str(target)])
    assert exit_info.value.code == 2 and not target.exists()
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "argument --out:" in error and "inside the installed package folder 'circuits'" in error
