"""One small registry type for every registry of the toolkit (tasks, objectives, loss kinds,
discovery methods, metrics, probe variables and input groupings, head roles, attention
conditions).

A :class:`Registry` maps names to values, each with a description and, where the value takes
options (a discovery method's ``steps``), their :class:`Option` s, so that the command line can
build its choices, flags and ``--help`` text from the registry instead of by hand:

    >>> METHODS = Registry("discovery method", sort=True)
    >>> METHODS.register("eap", eap, description="edge attribution patching")
    >>> METHODS.get("nope")            # UnknownName: unknown discovery method 'nope'; registered discovery methods: eap
    >>> with METHODS.temporarily("mine", my_method):   # tests: gone on exit, even after an exception
    ...     discover(..., method="mine")
    >>> with METHODS.replaced("eap", tiny_eap):         # tests: the original back on exit
    ...     discover(..., method="eap")

Registering a name twice is refused unless it is the same entry again (re-importing a module
or an idempotent registration is harmless); lookups of unknown names raise :class:`UnknownName`
(both a ``KeyError`` and a ``ValueError``) naming what is registered. Importing this module is
light (no torch).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

# The types an option may have, by name (the command line's converters).
OPTION_TYPES: dict[str, type] = {"int": int, "float": float, "str": str, "bool": bool}


@dataclass(frozen=True)
class Option:
    """One option of a registered entry, described well enough for a command-line flag.

    Attributes:
        name: the keyword the value takes (``--name-with-dashes`` on the command line).
        type: ``"int"``, ``"float"``, ``"str"`` or ``"bool"``.
        default: the value used when the option is not given.
        help: one line saying what it does (the flag's help, before its default).
        minimum: the smallest allowed value of a number option, or ``None``.
    """

    name: str
    type: str
    default: Any = None
    help: str = ""
    minimum: float | None = None

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"option name {self.name!r} is not an identifier")
        if self.type not in OPTION_TYPES:
            raise ValueError(f"option {self.name!r}: type {self.type!r} is not one of {sorted(OPTION_TYPES)}")
        if self.minimum is not None and self.type not in ("int", "float"):
            raise ValueError(f"option {self.name!r}: only int and float options take a minimum")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "default": self.default, "help": self.help,
                "minimum": self.minimum}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Option":
        return cls(**data)


@dataclass(frozen=True)
class Entry(Generic[T]):
    """A registered value with its name, description and options."""

    name: Hashable
    value: T
    description: str = ""
    options: tuple[Option, ...] = ()

    def option(self, name: str) -> Option:
        """The option ``name``; an unknown one lists the entry's options."""
        for option in self.options:
            if option.name == name:
                return option
        raise UnknownName(f"{self.name!r} has no option {name!r}; its options: "
                          f"{', '.join(o.name for o in self.options) or '(none)'}", name,
                          [o.name for o in self.options])

    def defaults(self) -> dict[str, Any]:
        """``{option: default}``."""
        return {option.name: option.default for option in self.options}


class UnknownName(KeyError, ValueError):
    """A lookup of a name nobody registered; the message lists the registered names. Both a
    ``KeyError`` (a mapping's miss) and a ``ValueError`` (a bad argument), so callers catching
    either keep working."""

    def __init__(self, message: str, name: Hashable, known: list) -> None:
        super().__init__(message)
        self.name = name
        self.known = known

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class DuplicateName(ValueError):
    """A second, different registration under a name already taken."""


class Registry(Generic[T]):
    """Names to values, each with a description and options.

    Args:
        kind: what an entry is, for messages (``"task"``, ``"discovery method"``).
        plural: its plural for messages (default ``kind + "s"``).
        sort: :meth:`names` sorted (else in registration order).
        check: ``check(entry) -> entry`` run on every registration (validate, fill in).
    """

    def __init__(self, kind: str, *, plural: str | None = None, sort: bool = False,
                 check: Callable[[Entry[T]], Entry[T]] | None = None) -> None:
        self.kind = kind
        self.plural = plural or kind + "s"
        self.sort = sort
        self._check = check
        self._entries: dict[Hashable, Entry[T]] = {}

    # ------------------------------------------------------------------ registering
    def register(self, name: Hashable, value: T, *, description: str = "",
                 options: tuple[Option, ...] | list[Option] = ()) -> T:
        """Add ``value`` under ``name`` and return it. A name already registered to a different
        entry is refused (:class:`DuplicateName`); the same entry again is a no-op."""
        entry = self._entry(name, value, description, options)
        existing = self._entries.get(name)
        if existing is not None:
            if _same(existing, entry):
                return existing.value
            raise DuplicateName(f"{self.kind} {name!r} is already registered (to {existing.value!r}); "
                                f"register {value!r} under another name")
        self._entries[name] = entry
        return value

    def add(self, name: Hashable, *, description: str = "",
            options: tuple[Option, ...] | list[Option] = ()) -> Callable[[T], T]:
        """Decorator form of :meth:`register`."""

        def decorate(value: T) -> T:
            self.register(name, value, description=description, options=options)
            return value

        return decorate

    @contextlib.contextmanager
    def temporarily(self, name: Hashable, value: T, *, description: str = "",
                    options: tuple[Option, ...] | list[Option] = ()) -> Iterator[T]:
        """Register ``value`` under a new ``name`` for the ``with`` block only (tests): the entry
        is removed on exit, also when the block raises. A name already registered is refused, so
        the block can neither replace nor remove a real entry."""
        if name in self._entries:
            raise DuplicateName(f"{self.kind} {name!r} is already registered; a temporary entry needs a new name")
        self._entries[name] = self._entry(name, value, description, options)
        try:
            yield value
        finally:
            self._entries.pop(name, None)

    @contextlib.contextmanager
    def replaced(self, name: Hashable, value: T) -> Iterator[T]:
        """The entry under ``name``, which must be registered, holds ``value`` instead for the
        ``with`` block only (tests: a real entry at a tiny size), with its description and
        options; the original is back on exit, also when the block raises. An unknown name is
        refused (:class:`UnknownName`): the block cannot add an entry (:meth:`temporarily` does)."""
        original = self.entry(name)
        self._entries[name] = self._entry(name, value, original.description, original.options)
        try:
            yield value
        finally:
            self._entries[name] = original

    def _entry(self, name: Hashable, value: T, description: str, options) -> Entry[T]:
        options = tuple(options)
        seen = [o.name for o in options]
        if len(set(seen)) != len(seen):
            raise ValueError(f"{self.kind} {name!r}: options named twice in {seen}")
        entry = Entry(name, value, description, options)
        return self._check(entry) if self._check is not None else entry

    # ------------------------------------------------------------------ looking up
    def entry(self, name: Hashable) -> Entry[T]:
        """The entry under ``name``; an unknown name raises :class:`UnknownName` listing the
        registered ones."""
        try:
            return self._entries[name]
        except KeyError:
            known = self.names()
            listed = ", ".join(str(n) for n in known) or "(none)"
            raise UnknownName(f"unknown {self.kind} {name!r}; registered {self.plural}: {listed}",
                              name, known) from None

    def get(self, name: Hashable) -> T:
        """The value under ``name`` (see :meth:`entry` for unknown names)."""
        return self.entry(name).value

    def names(self) -> list:
        """The registered names, sorted or in registration order (see ``sort``)."""
        return sorted(self._entries) if self.sort else list(self._entries)

    def entries(self) -> list[Entry[T]]:
        """The entries in the order of :meth:`names`."""
        return [self._entries[name] for name in self.names()]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(str(n) for n in self.names())})"


def _same(a: Entry, b: Entry) -> bool:
    try:
        same_value = a.value is b.value or bool(a.value == b.value)
    except Exception:  # values whose == is not a bool (arrays) are the same only by identity
        same_value = False
    return same_value and a.description == b.description and a.options == b.options


__all__ = ["DuplicateName", "Entry", "OPTION_TYPES", "Option", "Registry", "UnknownName"]
