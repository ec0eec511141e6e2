"""One writer for every self-contained HTML page the toolkit writes (reports, case studies, the
randomness channel, circuit and comparison drawings, the reproduction, the demo's index): the
shared style, plotly.js inlined once in the head (only when the page has a figure), every figure a
``div`` that uses it, so a page opens offline and stays small (plotly.js is ~4.7 MB; a figure
adds little). A figure wider than the window scrolls sideways in its own box, as tables do, so
the page itself is never wider than the window.

A page is a title and a list of sections, each an HTML string (already escaped), a plotly
figure, or ``(div id, figure)`` to name the figure's ``div`` (other figures get ``fig{i}``):

    >>> write_page("out/report.html", "attention report", ["<p>claims</p>", fig, ("roles", roles_fig)])
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Union

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

#: The plotly config of every figure: no logo, the figure follows its container's width.
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}

#: The style every page shares (a page may add rules after it: ``style=``).
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: right; }
th { background: #f3f3f3; } td.l { text-align: left; }
.note { color: #555; font-size: 0.9em; max-width: 60em; }
.scroll, .figure { overflow-x: auto; max-width: 100%; }
pre { white-space: pre-wrap; word-break: break-all; }
"""

Section = Union[str, go.Figure, tuple[str, go.Figure]]


def figure_div(fig: go.Figure, div_id: str) -> str:
    """``fig`` as a ``div`` (and its drawing script) that uses the page's plotly.js, in a wrapper
    that scrolls sideways when the figure is wider than the window (the page never does, so
    nothing beside the figure is pushed out of view)."""
    div = fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config=PLOTLY_CONFIG)
    return f"<div class='figure'>{div}</div>"


def page_html(title: str, sections: Iterable[Section], *, heading: bool = True, style: str = "") -> str:
    """The whole page as one string: ``<h1>`` ``title`` (unless ``heading=False``), then the
    sections in order."""
    parts: list[str] = [f"<h1>{html.escape(title)}</h1>"] if heading else []
    n_figures = 0
    for section in sections:
        if isinstance(section, str):
            parts.append(section)
            continue
        div_id, fig = section if isinstance(section, tuple) else (f"fig{n_figures}", section)
        parts.append(figure_div(fig, div_id))
        n_figures += 1
    script = f"<script type='text/javascript'>{get_plotlyjs()}</script>" if n_figures else ""
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title><style>{STYLE}{style}</style>{script}</head><body>"
            + "\n".join(parts) + "</body></html>")


def write_page(path: str | Path, title: str, sections: Iterable[Section], **options: Any) -> Path:
    """Write :func:`page_html` (``options``: its keywords) to ``path`` (folders created)."""
    from interp_rand.output import write_text

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text(path, page_html(title, sections, **options))


def write_figure(fig: go.Figure, path: str | Path, title: str | None = None) -> Path:
    """A page holding one figure, titled by ``title`` or the figure's own title (no heading:
    the figure shows its title)."""
    name = title or (fig.layout.title.text if fig.layout.title and fig.layout.title.text else "figure")
    return write_page(path, _plain(name), [fig], heading=False)


def _plain(text: str) -> str:
    """A figure title (which may hold ``<br>`` and tags) as plain text for ``<title>``."""
    import re

    return re.sub(r"<[^>]+>", " ", text).strip()


__all__ = ["PLOTLY_CONFIG", "STYLE", "figure_div", "page_html", "write_figure", "write_page"]
