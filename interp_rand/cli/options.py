"""Frozen config dataclasses as argparse options, so the CLI parses into the library's configs.

Each field becomes ``--field-name``; its help text is read from the class's ``Attributes:``
docstring section (:func:`~interp_rand.cli.catalogue.field_docs`), its type from the
annotation; ``bool`` fields get ``--x/--no-x``, ``Optional`` fields accept ``none``.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from interp_rand.validation import MAX_SEED, Bounds
from interp_rand.output.paths import OutputError, check_output, package_folders  # noqa: F401 (package_folders: re-exported)


def _parser_for(spec):
    """A string -> value converter for an option (``none`` -> ``None`` for optional fields);
    a number is checked against the field's declared bounds (:func:`number`)."""
    from interp_rand.cli.catalogue import TYPES

    base = TYPES[spec.type]
    if base in (int, float):
        return number(base, spec.limits(), word="none" if spec.optional else None, word_means=None)

    def convert(text: str):
        if spec.optional and text.lower() == "none":
            return None
        return base(text)

    convert.__name__ = base.__name__
    return convert


def add_dataclass_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type | list,
    *,
    defaults: dict[str, Any] | None = None,
    choices: dict[str, tuple] | None = None,
    skip: tuple[str, ...] = (),
    keep_default: bool = True,
) -> list[str]:
    """Add one option per field of ``cls`` (a dataclass, or its fields as
    :class:`~interp_rand.cli.catalogue.OptionSpec` s from the catalogue); return the field names
    added.

    ``defaults`` replace the fields' own defaults, in the help and (with ``keep_default``) in the
    namespace. ``keep_default=False`` leaves options the user did not give out of the namespace,
    so only given ones are applied (overrides on top of a task's default model, whose values
    ``defaults`` then shows).
    """
    from interp_rand.cli.catalogue import option_specs

    specs = option_specs(cls) if isinstance(cls, type) else cls
    added = []
    for spec in specs:
        if spec.name in skip:
            continue
        default = (defaults or {}).get(spec.name, spec.default)
        flag = "--" + spec.name.replace("_", "-")
        help_text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", spec.doc).replace("``", "")  # no Sphinx roles
        shown = f"{default:.4g}" if isinstance(default, float) else default
        kwargs: dict[str, Any] = {"dest": spec.name, "help": f"{help_text} (default: {shown})".strip()}
        if spec.type == "bool":
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = _parser_for(spec)
            kwargs["metavar"] = spec.name.upper()
            if choices and spec.name in choices:
                kwargs["choices"] = list(choices[spec.name])
                kwargs["metavar"] = "{" + ",".join(str(c) for c in choices[spec.name]) + "}"
        kwargs["default"] = default if keep_default else argparse.SUPPRESS
        parser.add_argument(flag, **kwargs)
        added.append(spec.name)
    return added


def collect(args: argparse.Namespace, names: list[str]) -> dict[str, Any]:
    """The values of ``names`` present in parsed args."""
    return {name: getattr(args, name) for name in names if hasattr(args, name)}


_THE_WORD = object()


def number(kind: type, bounds: Bounds | None = None, *, word: str | None = None, word_means: Any = _THE_WORD):
    """The argparse ``type=`` of every number option: a number of ``kind`` (``int`` or
    ``float``) inside ``bounds`` (default: any integer, any finite number: NaN and inf are
    refused unless the bounds allow inf), or ``word`` (returned as ``word_means``, default the
    word itself) where one is given. A bad value is refused while parsing, before any work, with
    what is allowed; ``bounds.counts`` marks a size whose memory the CLI estimates after parsing
    (:mod:`interp_rand.cli.memory`)."""
    bounds = bounds or Bounds()
    integer = kind is int
    means = word if word_means is _THE_WORD else word_means
    allowed = bounds.describe(integer) + (f" or {word!r}" if word is not None else "")

    def parse(text: str):
        if word is not None and text.lower() == word:
            return means
        try:
            value = kind(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"expected {allowed}, got {text!r}") from None
        wrong = bounds.problem(value, integer=integer)
        if wrong:
            raise argparse.ArgumentTypeError(f"{wrong}{f' or {word!r}' if word is not None else ''}, got {text.strip()}")
        return value

    parse.__name__ = allowed
    parse.bounds = bounds  # read by the memory estimate
    return parse


def number_or(word: str, value_of: Any, minimum: float, *, word_means: Any = _THE_WORD):
    """An argparse type: ``word`` (returned as ``word_means``, default the word itself) or a
    number read by ``value_of`` (``int``, ``float``) that is at least ``minimum``."""
    return number(value_of, Bounds(minimum=minimum), word=word, word_means=word_means)


# ``--top-k``: a number of edges (>= 1) or ``auto`` (the smallest faithful circuit)
top_k_option = number_or("auto", int, 1)
# ``--seed`` of every command: the seed of its draws
seed_option = number(int, Bounds(minimum=0, maximum=MAX_SEED))


def at_least(minimum: float, kind: type = int, *, counts: str | None = None):
    """``type=`` of an option that must be a number of ``kind`` (``int`` or ``float``) >=
    ``minimum`` (:func:`number`); ``counts="examples"`` marks a size of the data, whose memory
    is estimated before any work."""
    return number(kind, Bounds(minimum=minimum, counts=counts))


def option_type(option):
    """The argparse ``type=`` of a registry :class:`~interp_rand.registry.Option`."""
    from interp_rand.cli.catalogue import TYPES

    if option.type in ("int", "float"):
        return number(TYPES[option.type], Bounds(minimum=option.minimum))
    return TYPES[option.type]


def add_method_options(parser: argparse.ArgumentParser, *, skip: tuple[str, ...] = ()) -> list[str]:
    """One flag per option of the registered discovery methods (read from the catalogue, so from
    :data:`~circuits.methods.discovery.DISCOVERY_METHODS`), help and default from the option;
    ``skip``: options the command defines itself or does not offer. An option several methods
    share with different defaults shows each (unset, each method takes its own). Returns the
    option names added; :func:`method_options` reads them back for one method."""
    from interp_rand.cli import catalogue

    shared: dict[str, list] = {}
    for method in catalogue.choices("method"):
        for option in catalogue.method_options(method):
            shared.setdefault(option.name, []).append((method, option))
    added = []
    for name, uses in shared.items():
        if name in skip:
            continue
        option = uses[0][1]
        if any(o.type != option.type for _, o in uses):
            raise ValueError(f"discovery methods {[m for m, _ in uses]} give option {name!r} different types")
        defaults = {method: o.default for method, o in uses}
        if len(set(map(repr, defaults.values()))) == 1:
            default, shown = option.default, option.default
        else:
            default, shown = None, ", ".join(f"{m} {d}" for m, d in defaults.items())
        kwargs: dict[str, Any] = {"dest": name, "default": default, "help": f"{option.help} (default: {shown})"}
        if option.type == "bool":
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = option_type(option)
        parser.add_argument("--" + name.replace("_", "-"), **kwargs)
        added.append(name)
    return added


def described_choices(kind: str, default: str) -> str:
    """The help of a ``--method`` or ``--metric`` flag: each registered name with its registry
    description (read from the catalogue), and the default."""
    from interp_rand.cli import catalogue

    describe = {"method": catalogue.method_description, "metric": catalogue.metric_description}[kind]
    listed = "; ".join(f"{name}: {describe(name)}" for name in catalogue.choices(kind))
    return f"{listed} (default: {default})".replace("%", "%%")


def method_options(args: argparse.Namespace, method: str) -> dict[str, Any]:
    """The options of discovery method ``method`` as parsed: each option whose flag the command
    has (an unset one, ``None``, takes the method's default); options without a flag on this
    command are left out, so the method's own default applies."""
    from interp_rand.cli import catalogue

    options = {}
    for option in catalogue.method_options(method):
        if hasattr(args, option.name):
            value = getattr(args, option.name)
            options[option.name] = option.default if value is None else value
    return options


def output_path(text: str) -> Path:
    """``type=`` of every ``--out`` that names a folder: checked while parsing
    (:func:`~interp_rand.output.paths.check_output`: outside the installed packages, not an
    existing file, a dangling link or a link loop), so a bad path costs one line, no work."""
    try:
        return check_output(text, "folder")
    except OutputError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def output_file(text: str) -> Path:
    """``type=`` of an ``--out`` that names one file (``report``, ``curve``): as
    :func:`output_path`, and not a folder or a symbolic link."""
    try:
        return check_output(text, "file")
    except OutputError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def qk_head(text: str) -> tuple[int, int, int]:
    """``"1.2@7"`` -> ``(1, 2, 7)``: layer, head, query position (the type of ``--qk-head``)."""
    try:
        head, query = text.split("@")
        layer, index = head.split(".")
        out = (int(layer), int(index), int(query))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not LAYER.HEAD@QUERY, e.g. 1.2@7") from None
    if min(out) < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: layer, head and query position must be >= 0")
    return out


def add_qk_head_option(parser: argparse.ArgumentParser, where: str) -> None:
    """``--qk-head L.H@Q`` (repeatable): explain head H of layer L at query position Q by
    query/key attribution with a patching check, shown ``where``."""
    parser.add_argument("--qk-head", action="append", default=[], type=qk_head, metavar="L.H@Q",
                        help=f"{where} the query/key attribution of head H of layer L at query position Q (a "
                        "residual-stream position; a seed token is 0): why the head attends where it does, "
                        "with a patching check; repeat for more heads, e.g. --qk-head 1.2@7")
