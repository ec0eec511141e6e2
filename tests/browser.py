"""Render a page in headless chromium (Debian's; ``.ci/run`` installs it) and measure its figures
in the real browser: per plotly figure, the tick labels drawn and every text (titles,
annotations, legend, tick and node labels) that falls outside the figure; for the page, whether
it is wider than the window. Tests skip, saying why, when chromium is missing."""

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
    out.figures[div.id] = {width: box.width, height: box.height, texts: n, outside: outside,
                           xticks: ticks('.xaxislayer-above'), yticks: ticks('.yaxislayer-above'),
                           min_font: sizes.length ? Math.min.apply(null, sizes) : null};
  });
  document.querySelectorAll('table').forEach(function (t) {
    var p = t.parentElement, style = window.getComputedStyle(p);
    out.tables.push({scrolls: style.overflowX === 'auto' || style.overflowX === 'scroll',
                     right: t.getBoundingClientRect().right, parentRight: p.getBoundingClientRect().right});
  });
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
