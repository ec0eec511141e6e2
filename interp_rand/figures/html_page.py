"""One writer for every HTML page the toolkit writes (reports, case studies, the randomness
channel, circuit and comparison drawings, the reproduction, the demo's index): the shared style,
the page's :class:`~interp_rand.figures.headline.Headline` first, then its sections, every figure
a ``div``.

plotly.js (~4.7 MB) is written once per output folder, as ``plotly.min.js``, and every page in
that folder (or below it, inside :func:`asset_folder`) loads it by a relative path, so pages open
offline and a folder of twenty pages does not carry twenty copies. :func:`page_html` without
``plotly_src`` inlines it instead (a page handed around as one string). A figure wider than the
window scrolls sideways in its own box, as tables do, so the page itself is never wider than the
window.

A page is a title and a list of sections, each an HTML string (already escaped), a plotly
figure, or ``(div id, figure)`` to name the figure's ``div`` (other figures get ``fig{i}``):

    >>> write_page("out/report.html", "attention report", ["<p>claims</p>", fig, ("roles", roles_fig)],
    ...            headline=Headline("roles found", "3 of 4 roles above chance", "holds"))
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Union

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from interp_rand.figures.headline import HEADLINE_STYLE, Headline

#: The name of the one plotly.js file of an output folder.
PLOTLY_FILE = "plotly.min.js"
# the folder whose plotly.js the pages written now share (see asset_folder)
_ASSET_ROOT: ContextVar[Path | None] = ContextVar("interp_rand_asset_root", default=None)

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


def page_html(title: str, sections: Iterable[Section], *, heading: bool = True, style: str = "",
              headline: Headline | None = None, plotly_src: str | None = None) -> str:
    """The whole page as one string: ``<h1>`` ``title`` (unless ``heading=False``), the
    ``headline``, then the sections in order. A page with a figure loads plotly.js from
    ``plotly_src`` (a relative URL), or inlines it when that is None."""
    parts: list[str] = [f"<h1>{html.escape(title)}</h1>"] if heading else []
    if headline is not None:
        parts.append(headline.html())
    n_figures = 0
    for section in sections:
        if isinstance(section, str):
            parts.append(section)
            continue
        div_id, fig = section if isinstance(section, tuple) else (f"fig{n_figures}", section)
        parts.append(figure_div(fig, div_id))
        n_figures += 1
    if not n_figures:
        script = ""
    elif plotly_src is None:
        script = f"<script type='text/javascript'>{get_plotlyjs()}</script>"
    else:
        script = f"<script type='text/javascript' src='{html.escape(plotly_src, quote=True)}'></script>"
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title><style>{STYLE}{HEADLINE_STYLE}{style}</style>{script}</head><body>"
            + "\n".join(parts) + "</body></html>")


@contextmanager
def asset_folder(root: str | Path) -> Iterator[Path]:
    """Inside this block, every page written in ``root`` or below it shares ``root``'s one
    ``plotly.min.js`` (the demo's folder of step folders); elsewhere a page shares its own
    folder's."""
    token = _ASSET_ROOT.set(Path(root).resolve())
    try:
        yield Path(root)
    finally:
        _ASSET_ROOT.reset(token)


def plotly_file(folder: str | Path) -> Path:
    """``folder/plotly.min.js``, written (atomically) unless it already holds this plotly.js."""
    from interp_rand.output import write_text

    path = Path(folder) / PLOTLY_FILE
    text = get_plotlyjs()
    if not (path.is_file() and not path.is_symlink() and path.stat().st_size == len(text.encode("utf-8"))):
        write_text(path, text)
    return path


def _final_folder(path: Path) -> Path:
    """The folder the page at ``path`` will live in: a page written into a staging folder
    (:func:`interp_rand.output.replace_files`) lives in the folder the stage is moved into."""
    from interp_rand.output.folder import STAGE_PREFIX

    here = path.parent.resolve()
    return here.parent if here.name.startswith(STAGE_PREFIX) else here


def _assets_for(folder: Path) -> Path:
    """The folder whose plotly.js a page living in ``folder`` loads."""
    root = _ASSET_ROOT.get()
    if root is not None and (folder == root or root in folder.parents):
        return root
    return folder


def write_page(path: str | Path, title: str, sections: Iterable[Section], **options: Any) -> Path:
    """Write :func:`page_html` (``options``: its keywords) to ``path`` (folders created); a page
    with a figure loads the output folder's ``plotly.min.js`` (written on first use)."""
    from interp_rand.output import write_text

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sections = list(sections)
    if "plotly_src" not in options and any(not isinstance(s, str) for s in sections):
        final = _final_folder(path)  # plotly.min.js is shared, so it is written in place, not staged
        js = plotly_file(_assets_for(final))
        options["plotly_src"] = Path(os.path.relpath(js, final)).as_posix()
    return write_text(path, page_html(title, sections, **options))


def write_figure(fig: go.Figure, path: str | Path, title: str | None = None,
                 headline: Headline | None = None) -> Path:
    """A page holding one figure, titled by ``title`` or the figure's own title (no heading:
    the figure shows its title), after its ``headline``."""
    name = title or (fig.layout.title.text if fig.layout.title and fig.layout.title.text else "figure")
    return write_page(path, _plain(name), [fig], heading=False, headline=headline)


def _plain(text: str) -> str:
    """A figure title (which may hold ``<br>`` and tags) as plain text for ``<title>``."""
    import re

    return re.sub(r"<[^>]+>", " ", text).strip()


__all__ = ["PLOTLY_CONFIG", "PLOTLY_FILE", "STYLE", "Headline", "asset_folder", "figure_div", "page_html",
           "plotly_file", "write_figure", "write_page"]
