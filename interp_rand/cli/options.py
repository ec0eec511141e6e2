"""Frozen config dataclasses as argparse options, so the CLI parses into the library's configs.

Each field becomes ``--field-name``; its help text is read from the class's ``Attributes:``
docstring section, its type from the annotation; ``bool`` fields get ``--x/--no-x``,
``Optional`` fields accept ``none``.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import typing
from typing import Any


def field_docs(cls: type) -> dict[str, str]:
    """``{field: description}`` parsed from a Google-style ``Attributes:`` docstring section;
    a line ``a, b: text`` documents several fields at once."""
    doc = cls.__doc__ or ""
    if "Attributes:" not in doc:
        return {}
    body = doc.split("Attributes:", 1)[1]
    docs: dict[str, str] = {}
    current: list[str] = []
    for line in body.splitlines():
        match = re.match(r"^\s{4,8}([a-z_][a-z0-9_, ]*):\s*(.*)$", line)
        if match:
            current = [name.strip() for name in match.group(1).split(",")]
            for name in current:
                docs[name] = match.group(2).strip()
        elif line.strip() and current:
            for name in current:
                docs[name] += " " + line.strip()
        elif not line.strip() and current and docs.get(current[0]):
            current = []
    return docs


def _parser_for(annotation: Any):
    """A string -> value converter for a field's annotation (handles ``X | None``)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional = type(None) in typing.get_args(annotation)
    base = args[0] if optional and args else annotation

    def convert(text: str):
        if optional and text.lower() == "none":
            return None
        return base(text)

    convert.__name__ = getattr(base, "__name__", "value")
    return convert


def add_dataclass_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type,
    *,
    defaults: dict[str, Any] | None = None,
    choices: dict[str, tuple] | None = None,
    skip: tuple[str, ...] = (),
    keep_default: bool = True,
) -> list[str]:
    """Add one option per field of ``cls``; return the field names added.

    ``keep_default=False`` leaves options the user did not give out of the namespace, so only
    given ones are applied (overrides on top of a task's default model).
    """
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    added = []
    for field in dataclasses.fields(cls):
        if field.name in skip or not field.init:
            continue
        default = (defaults or {}).get(field.name, field.default)
        flag = "--" + field.name.replace("_", "-")
        help_text = docs.get(field.name, "").replace("``", "")
        shown = "task default" if not keep_default else default
        kwargs: dict[str, Any] = {"dest": field.name, "help": f"{help_text} (default: {shown})".strip()}
        annotation = hints[field.name]
        if annotation is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = _parser_for(annotation)
            kwargs["metavar"] = field.name.upper()
            if choices and field.name in choices:
                kwargs["choices"] = list(choices[field.name])
                kwargs["metavar"] = "{" + ",".join(str(c) for c in choices[field.name]) + "}"
        kwargs["default"] = default if keep_default else argparse.SUPPRESS
        parser.add_argument(flag, **kwargs)
        added.append(field.name)
    return added


def collect(args: argparse.Namespace, names: list[str]) -> dict[str, Any]:
    """The values of ``names`` present in parsed args."""
    return {name: getattr(args, name) for name in names if hasattr(args, name)}


def top_k_option(text: str) -> int | str:
    """``--top-k``: a number of edges (>= 1) or ``auto`` (the smallest faithful circuit)."""
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of edges or 'auto', got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value
