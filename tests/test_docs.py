"""The README and ``docs/`` say only what runs: every command they write is checked against what
exists, without running it.

- every ``interp-rand ...`` command (in a shell block, or inline in backquotes) names
  sub-commands, positional choices and options that the command line's own parser
  (:func:`interp_rand.cli.main.build_parser`) has, and option values among the option's choices;
  a shell-block command without placeholders is parsed whole by :func:`interp_rand.cli.main.parse`
  (bounds, memory estimate; no command's work);
- ``make TARGET`` names a target of the Makefile; ``python SCRIPT.py --opt`` a script that
  exists and takes ``--opt``; ``python -m MODULE`` a module that exists;
- every ``from MODULE import NAME`` of a Python block imports, and every Python block compiles;
- every relative link resolves to a file of the repository (and ``#anchor`` to a heading of it),
  every ``docs/`` file is linked from the README, and the README lists every sub-command and
  stays at most :data:`README_MAX_LINES` lines.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import importlib.util
import io
import re
import shlex
from pathlib import Path

import pytest

from interp_rand.cli.main import build_parser, parse

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = (README, *sorted((ROOT / "docs").glob("*.md")))
README_MAX_LINES = 400
SHELL = ("", "bash", "sh", "shell", "console")
PARSER = build_parser()


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _blocks(page: Path) -> list[tuple[str, int, list[str]]]:
    """The fenced code blocks of ``page``: (language, line number of the first line, lines)."""
    blocks, lang, start, body = [], None, 0, []
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            if lang is None:
                lang, start, body = line.strip()[3:].strip(), number + 1, []
            else:
                blocks.append((lang, start, body))
                lang = None
        elif lang is not None:
            body.append(line)
    assert lang is None, f"{_rel(page)}: a code block opened at line {start - 1} is never closed"
    return blocks


def _prose(page: Path) -> str:
    """``page`` without its fenced code blocks."""
    return re.sub(r"^\s*```.*?^\s*```[^\n]*$", "", page.read_text(), flags=re.S | re.M)


def _shell_lines() -> list[tuple[str, str]]:
    """(where, command) of every line of every shell block: ``$ `` and leading ``VAR=value``
    assignments removed."""
    found = []
    for page in PAGES:
        for lang, start, body in _blocks(page):
            if lang not in SHELL:
                continue
            for offset, line in enumerate(body):
                line = re.sub(r"^\$\s+", "", line.strip())
                line = re.sub(r"^(?:[A-Z_][A-Z0-9_]*=\S+\s+)+", "", line)
                if line:
                    found.append((f"{_rel(page)}:{start + offset}", line))
    return found


def _inline(prefix: str) -> list[tuple[str, str]]:
    """(where, text) of every inline code span of the pages' prose that starts with ``prefix``."""
    return [(_rel(page), span) for page in PAGES
            for span in re.findall(r"`(" + re.escape(prefix) + r"[^`]*)`", _prose(page))]


def _words(line: str) -> list[str]:
    return shlex.split(line, comments=True)


def _is_output(words: list[str]) -> bool:
    """A line a command printed (``interp-rand eval: error: ...``), not a command."""
    return len(words) > 1 and words[1].endswith(":")


def _placeholder(word: str) -> bool:
    """A word that stands for a value: ``RUN_DIR``, ``L.H@Q``, ``FILE.npy``, ``a|b``, ``...``."""
    return (word in ("...", "…") or "|" in word or "@Q" in word
            or bool(re.fullmatch(r"[A-Z][A-Z0-9_]*(\.[A-Za-z0-9]+)?|[A-Z][A-Z0-9_]*:[A-Z_]+", word)))


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _check_choice(where: str, what: str, word: str, choices) -> None:
    if choices is None or word in ("...", "…") or (_placeholder(word) and "|" not in word):
        return
    allowed = {str(c) for c in choices}
    for alternative in word.split("|"):
        assert alternative in allowed, f"{where}: {what} has no choice {alternative!r}; it has {sorted(allowed)}"


def check_names(where: str, words: list[str]) -> None:
    """``words`` (after ``interp-rand``) name sub-commands, options, positional and option-value
    choices the parser has; brackets of ``[--opt VALUE]`` are read as the option itself."""
    parser, chain = PARSER, ["interp-rand"]
    words = [w.strip("[]") for w in words]
    positionals = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word:
            continue
        if word in ("...", "…"):
            return
        if word.startswith("-") and not re.fullmatch(r"-[0-9.]+", word):
            name, _, value = word.partition("=")
            action = parser._option_string_actions.get(name)
            below = _subparsers(parser)
            if action is None and below is not None:  # `train --checkpoint-schedule`: an option of every `train TASK`
                action = next((p._option_string_actions[name] for p in below.choices.values()
                               if name in p._option_string_actions), None)
            options = sorted(o for o in parser._option_string_actions if o.startswith("--"))
            assert action is not None, f"{where}: `{' '.join(chain)}` has no option {name}; it has {options}"
            if value:
                _check_choice(where, f"`{' '.join(chain)} {name}`", value, action.choices)
                continue
            takes = action.nargs
            if takes == 0:
                continue
            count = 1 if takes in (None, "?") else (takes if isinstance(takes, int) else len(words))
            for _ in range(count):
                if i >= len(words) or words[i].startswith("--") or not words[i]:
                    break
                _check_choice(where, f"`{' '.join(chain)} {name}`", words[i].strip("[]"), action.choices)
                i += 1
            continue
        commands = _subparsers(parser)
        if commands is not None:
            if _placeholder(word) and "|" not in word:
                return  # `interp-rand COMMAND --help`: nothing more to check
            _check_choice(where, f"`{' '.join(chain)}`", word, commands.choices)
            parser = commands.choices[word.split("|")[0]]
            chain.append(word)
            positionals = [a for a in parser._actions if not a.option_strings and not isinstance(a, argparse._SubParsersAction)]
            continue
        if positionals:
            action = positionals[0]
            if action.nargs not in ("*", "+"):
                positionals = positionals[1:]
            _check_choice(where, f"`{' '.join(chain)}` {action.dest}", word, action.choices)


def _cli_commands() -> list[tuple[str, list[str], bool]]:
    """(where, words after ``interp-rand``, from a shell block) of every command the pages write."""
    found = []
    for where, line in _shell_lines():
        words = _words(line) if line.split()[0] == "interp-rand" else []
        if words and not _is_output(words):
            found.append((where, words[1:], True))
    for where, span in _inline("interp-rand "):
        found.append((where, _words(span)[1:], False))
    # a sub-command written without the program's name, with options (`eval --seeds`)
    names = set(_subparsers(PARSER).choices)
    for page in PAGES:
        for span in re.findall(r"`([a-z][a-z-]*\s[^`]*--[^`]*)`", _prose(page)):
            if span.split()[0] in names:
                found.append((_rel(page), _words(span), False))
    return found


CLI = _cli_commands()


def test_pages_write_commands():
    # the extraction itself: the README's first 5 minutes and the docs' reference are read
    readme = [w for w, _, _ in CLI if w.startswith("README.md")]
    assert len(readme) >= 10 and len(CLI) >= 50, (len(readme), len(CLI))


@pytest.mark.parametrize("where, words, block", CLI, ids=[f"{w}:{' '.join(c[:2])}" for w, c, _ in CLI])
def test_cli_command_names_exist(where, words, block):
    check_names(where, words)


# (`--help` exits 0 by design: its line is checked by name only)
COMPLETE = [(where, words) for where, words, block in CLI
            if block and not any(map(_placeholder, words)) and not {"-h", "--help"} & set(words)]


@pytest.mark.parametrize("where, words", COMPLETE, ids=[f"{w}:{' '.join(c[:2])}" for w, c in COMPLETE])
def test_cli_command_parses(where, words, tmp_path, monkeypatch):
    # the whole line through the command line's parse step: every value in its bounds, nothing run
    monkeypatch.chdir(tmp_path)
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            args = parse(words, PARSER)
    except SystemExit as stop:
        pytest.fail(f"{where}: `interp-rand {shlex.join(words)}` does not parse (exit {stop.code}): {stderr.getvalue().strip()}")
    assert callable(args.run)


def _makefile_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z][\w-]*):", (ROOT / "Makefile").read_text(), flags=re.M))


def _other_commands() -> list[tuple[str, list[str]]]:
    found = [(where, _words(line)) for where, line in _shell_lines() if line.split()[0] in ("make", "python")]
    found += [(where, _words(span)) for prefix in ("make ", "python ") for where, span in _inline(prefix)]
    return [(where, words) for where, words in found if words and words[0] in ("make", "python")]


OTHER = _other_commands()


def test_pages_write_scripts():
    assert any(w[0] == "make" for _, w in OTHER) and any(w[0] == "python" for _, w in OTHER)


@pytest.mark.parametrize("where, words", OTHER, ids=[f"{w}:{' '.join(c[:2])}" for w, c in OTHER])
def test_make_targets_and_scripts_exist(where, words):
    if words[0] == "make":
        targets = [w for w in words[1:] if "=" not in w and not w.startswith("-")]
        missing = set(targets) - _makefile_targets()
        assert not missing, f"{where}: the Makefile has no target {sorted(missing)}; it has {sorted(_makefile_targets())}"
        return
    if words[1] == "-c":
        return
    if words[1] == "-m":
        assert importlib.util.find_spec(words[2]) is not None, f"{where}: no module {words[2]}"
        return
    script = ROOT / words[1]
    assert script.is_file(), f"{where}: no script {words[1]}"
    source = script.read_text()
    for word in words[2:]:
        if word.startswith("--"):
            name = word.partition("=")[0]
            assert f'"{name}"' in source or f"'{name}'" in source, f"{where}: {words[1]} takes no option {name}"


PYTHON = [(f"{_rel(page)}:{start}", "\n".join(body)) for page in PAGES
          for lang, start, body in _blocks(page) if lang == "python"]


@pytest.mark.parametrize("where, code", PYTHON, ids=[w for w, _ in PYTHON])
def test_python_blocks_compile_and_import(where, code):
    tree = ast.parse(code, where)  # a SyntaxError names the block
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name) or importlib.util.find_spec(f"{node.module}.{alias.name}"), \
                    f"{where}: `from {node.module} import {alias.name}`: {node.module} has no {alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#+\s+(.*)$", _prose(page), flags=re.M)}


LINKS = [(page, target) for page in PAGES for target in re.findall(r"\]\(([^)\s]+)\)", _prose(page))
         if not re.match(r"[a-z]+:", target)]


def test_links_resolve():
    assert LINKS
    broken = []
    for page, target in LINKS:
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.is_relative_to(ROOT) or not file.exists():
            broken.append(f"{_rel(page)}: ({target}): no file {path}")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{_rel(page)}: ({target}): {_rel(file)} has no heading #{anchor}")
    assert not broken, "\n".join(broken)


def test_every_doc_is_linked_from_the_readme():
    linked = {(README.parent / t.partition("#")[0]).resolve() for p, t in LINKS if p == README}
    unlinked = [_rel(p) for p in PAGES[1:] if p.resolve() not in linked]
    assert not unlinked, f"docs files the README does not link: {unlinked}"


def test_readme_lists_every_command():
    listed = set(re.findall(r"^\| `([a-z-]+)` \|", README.read_text(), flags=re.M))
    commands = set(_subparsers(PARSER).choices)
    assert commands <= listed, f"README's command table lacks {sorted(commands - listed)}"


def test_readme_is_short():
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; at most {README_MAX_LINES} (the rest goes to docs/)"


def test_pages_cite_only_the_repository():
    for page in PAGES:
        text = page.read_text()
        assert "/work/" not in text and "../shared" not in text, f"{_rel(page)} cites a path outside the repository"


def test_readme_python_runs(tmp_path, monkeypatch, capsys):
    # the first 5 minutes' Python step, run as written (on the zoo: nothing trained)
    monkeypatch.chdir(tmp_path)
    blocks = [code for where, code in PYTHON if where.startswith("README.md")]
    assert blocks, "the README has no Python step"
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    assert "torch.Size([" in capsys.readouterr().out
