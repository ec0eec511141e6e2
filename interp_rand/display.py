"""How a result shows itself in a notebook and at the prompt: a short ``repr`` (its headline)
and ``_repr_html_`` (the headline, then its lines), instead of a dataclass repr of every array
and nested result (up to tens of thousands of characters).

A result class inherits :class:`Displayed` and is declared ``@dataclass(repr=False)``; it
gives ``headline()`` and ``lines()`` (or ``text()``).
"""

from __future__ import annotations

import html

REPR_MAX = 200  # characters of the headline a plain repr shows


class Displayed:
    """``__repr__`` and ``_repr_html_`` from the object's ``headline()`` and ``lines()``."""

    def _headline_text(self) -> str:
        if hasattr(self, "headline"):
            return str(self.headline())
        text = self._lines()
        return text[0] if text else ""

    def _lines(self) -> list[str]:
        if hasattr(self, "lines"):
            lines = self.lines() if callable(self.lines) else self.lines
            return list(lines)
        return self.text().splitlines() if hasattr(self, "text") else []

    def __repr__(self) -> str:
        head = self._headline_text()
        head = head if len(head) <= REPR_MAX else head[: REPR_MAX - 3] + "..."
        return f"<{type(self).__name__}: {head}>"

    def _repr_html_(self) -> str:
        lines = self._lines()
        return (f"<div><b>{html.escape(type(self).__name__)}</b>: {html.escape(self._headline_text())}"
                f"<pre style='white-space:pre-wrap'>{html.escape(chr(10).join(lines))}</pre></div>")


__all__ = ["Displayed", "REPR_MAX"]
