"""Render a page in headless chromium (Debian's; ``.ci/run`` installs it) and measure its figures
in the real browser: per plotly figure, the tick labels drawn, every text (titles, annotations,
legend, tick and node labels) that falls outside the figure, and whether it scrolls sideways in
its box; for the page, whether it is wider than the window, its headline (text, verdict, lines)
and the order of headline, figures and tables. :func:`assert_first_look` checks what a reader
sees first in a 1280 × 800 window (issue 23). Tests skip, saying why, when chromium is missing."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html import unescape
from pathlib import Path

import pytest

# Runs after the page loaded and plotly drew (virtual time lets the timeout pass at once):
# writes its measurements into a <pre id="layout-check"> that --dump-dom returns.
_MEASURE = """<script>
window.addEventListener('error', function (e) { console.log('PAGE_ERROR ' + e.message); });
window.addEventListener('load', function () { setTimeout(function () {
  var out = {page: {scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth},
             figures: {}, tables: []};
  document.querySelectorAll('.js-plotly-plot').forEach(function (div) {
    var svg = div.querySelector('.main-svg'); if (!svg) { return; }
    var box = svg.getBoundingClientRect(), outside = [], n = 0;
    div.querySelectorAll('svg text').forEach(function (t) {
      var text = (t.textContent || '').trim(); if (!text) { return; }
      n += 1;
      var r = t.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) { return; }
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1) {
        outside.push(text);
      }
    });
    var ticks = function (sel) { return Array.prototype.filter.call(div.querySelectorAll(sel + ' text'),
      function (t) { return (t.textContent || '').trim() !== ''; }).map(function (t) { return t.textContent; }); };
    var sizes = Array.prototype.map.call(div.querySelectorAll('svg text'), function (t) {
      return parseFloat(window.getComputedStyle(t).fontSize); });
    var wrap = div.closest('.figure') || div.parentElement;
    out.figures[div.id] = {width: box.width, height: box.height, texts: n, outside: outside,
                           scrolls: wrap ? wrap.scrollWidth > wrap.clientWidth + 1 : false,
                           right: box.right,
                           xticks: ticks('.xaxislayer-above'), yticks: ticks('.yaxislayer-above'),
                           min_font: sizes.length ? Math.min.apply(null, sizes) : null};
  });
  document.querySelectorAll('table').forEach(function (t) {
    var p = t.parentElement, style = window.getComputedStyle(p);
    out.tables.push({scrolls: style.overflowX === 'auto' || style.overflowX === 'scroll',
                     right: t.getBoundingClientRect().right, parentRight: p.getBoundingClientRect().right});
  });
  var head = document.querySelector('.headline');
  var lineOf = function (e) { var cs = window.getComputedStyle(e), lh = parseFloat(cs.lineHeight);
    return isNaN(lh) ? 1.2 * parseFloat(cs.fontSize) : lh; };
  out.headline = head ? {text: (head.innerText || '').trim(), verdict: head.getAttribute('data-verdict') || '',
                         top: head.getBoundingClientRect().top,
                         lines: Math.round((head.clientHeight - parseFloat(window.getComputedStyle(head).paddingTop)
                                            - parseFloat(window.getComputedStyle(head).paddingBottom)) / lineOf(head))}
                      : null;
  out.order = Array.prototype.map.call(document.querySelectorAll('.headline, .js-plotly-plot, table'),
    function (e) { return e.classList.contains('headline') ? 'headline' : e.tagName === 'TABLE' ? 'table' : 'figure'; });
  var pre = document.createElement('pre'); pre.id = 'layout-check';
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
}, 500); });
</script>"""


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def render(page: Path, shot: Path, size: str = "1400,1800") -> dict:
    """Render ``page`` (a file; a measured copy is written next to it), screenshot it to ``shot``
    and return the measurements plus ``errors`` (page errors on the console)."""
    binary = chromium()
    if binary is None:
        pytest.skip("no chromium binary on PATH (.ci/run installs Debian's chromium); the browser check did not run")
    text = page.read_text(encoding="utf-8")
    measured = page.with_name(page.stem + ".measured.html")
    head = re.search(r"<head[^>]*>", text, flags=re.I)
    measured.write_text(text[: head.end()] + _MEASURE + text[head.end():] if head else _MEASURE + text,
                        encoding="utf-8")
    shot.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
         "--hide-scrollbars", "--virtual-time-budget=20000", f"--window-size={size}", f"--screenshot={shot}",
         "--dump-dom", measured.as_uri()],
        capture_output=True, text=True, timeout=120, cwd=page.parent,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'<pre id="layout-check">(.*?)</pre>', proc.stdout, flags=re.S)
    assert found, "the measuring script did not run"
    result = json.loads(unescape(found.group(1)))
    result["errors"] = [line for line in proc.stderr.splitlines()
                        if ":CONSOLE" in line and ("PAGE_ERROR" in line or "Uncaught" in line)]
    return result


#: The window a first look is taken in (issue 23): a laptop screen.
FIRST_LOOK = "1280,800"
#: A page's own bytes (its HTML, without the folder's shared plotly.min.js) may not exceed this.
PAGE_BUDGET = 2_000_000


def page_weight(page: Path) -> tuple[int, int]:
    """``(own bytes, shared bytes)``: the page's HTML, and the local scripts it loads (the
    output folder's one plotly.min.js)."""
    text = page.read_text(encoding="utf-8")
    shared = 0
    for src in re.findall(r"<script[^>]*\bsrc=['\"]([^'\"]+)['\"]", text):
        assert "://" not in src, f"{page.name} fetches {src}: pages must open offline"
        target = (page.parent / src)
        assert target.is_file(), f"{page.name} loads {src}, which is not there"
        shared += target.stat().st_size
    return page.stat().st_size, shared


def first_look(page: Path, shot: Path) -> dict:
    """:func:`render` at :data:`FIRST_LOOK`, plus the page's weight."""
    result = render(page, shot, FIRST_LOOK)
    result["weight"] = page_weight(page)
    return result


def assert_first_look(result: dict, *, verdict: bool = True, budget: int = PAGE_BUDGET,
                      tables_after_figures: bool = True) -> None:
    """What a reader sees first, at :data:`FIRST_LOOK`: the page readable
    (:func:`assert_readable`); a headline on top, of at most three lines, with a verdict word
    when ``verdict``; the main (first) figure not scrolling sideways and not wider than the
    window; figures before tables (when the page has both and ``tables_after_figures``); and the
    page's own bytes within ``budget``."""
    assert_readable(result)
    head = result.get("headline")
    assert head is not None, "the page has no headline"
    assert head["lines"] <= 3, head
    assert result["order"][0] == "headline", result["order"]
    if verdict:
        assert head["verdict"] in ("holds", "fails", "inconclusive"), head
        assert head["verdict"].upper() in head["text"], head
    figures = list(result["figures"].values())
    if figures:
        main = figures[0]
        assert not main["scrolls"], ("the main figure scrolls sideways", main["width"])
        assert main["right"] <= result["page"]["innerWidth"] + 1, main
    order = [o for o in result["order"] if o != "headline"]
    if tables_after_figures and "figure" in order and "table" in order:
        assert order.index("figure") < order.index("table"), order
    own, _ = result["weight"]
    assert own <= budget, f"the page's own HTML is {own:,} bytes (budget {budget:,})"


def screenshot_path(tmp_path: Path, name: str) -> Path:
    """Where a test puts its screenshot: ``$FIGURE_SCREENSHOT_DIR`` if set (to look at them)."""
    return Path(os.environ.get("FIGURE_SCREENSHOT_DIR", tmp_path)) / name


def assert_readable(result: dict, figures: int | None = None, min_font: float = 11) -> None:
    """No page error; every figure drew tick labels on both axes (where it has axes), no text
    outside its figure and no text under ``min_font`` px; the page no wider than the window;
    every table inside a horizontally scrolling wrapper."""
    assert not result["errors"], result["errors"]
    if figures is not None:
        assert len(result["figures"]) == figures, sorted(result["figures"])
    for name, fig in result["figures"].items():
        assert fig["outside"] == [], (name, fig["outside"])
        assert fig["min_font"] is None or fig["min_font"] >= min_font, (name, fig["min_font"])
    page = result["page"]
    assert page["scrollWidth"] <= page["innerWidth"], page
    assert all(t["scrolls"] for t in result["tables"]), result["tables"]
