"""Render a page in headless chromium (Debian's; ``.ci/run`` installs it) and measure its figures
in the real browser: per plotly figure, the tick labels drawn, every text (titles, annotations,
legend, tick and node labels) that falls outside the figure, and whether it scrolls sideways in
its box; for the page, whether it is wider than the window, its headline (text, verdict, lines)
and the order of headline, figures and tables. :func:`assert_first_look` checks what a reader
sees first in a 1280 × 800 window (issue 23). Tests skip, saying why, when chromium is missing.

One chromium serves every page of a test process (:class:`Chromium`, started on first use and
driven over the DevTools protocol) and takes the steps ``chromium --headless --window-size=W,H
--virtual-time-budget=20000 --screenshot --dump-dom PAGE`` takes (its measurements compared equal,
page by page, with the one-shot command's on tests/interp_rand/figures/test_html_page.py's pages).
The pages of one folder share a tab, whose renderer then compiles their plotly.min.js once: a
second page of a folder costs about 1 CPU-s instead of 3 (issue 25: the suite's time)"""

from __future__ import annotations

import atexit
import base64
import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import time
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


#: Chromium's flags for every page (``--window-size`` and the virtual time are per page).
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars")
#: The virtual time a page may use (ms): its timers fire at once, so the measuring script's
#: ``setTimeout`` and plotly's drawing finish before the DOM is read.
VIRTUAL_TIME_BUDGET = 20_000
TIMEOUT_S = 120


class Chromium:
    """A headless chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
    it reads commands on its fd 3 and answers on fd 4, one JSON message per NUL-terminated record)."""

    def __init__(self, binary: str):
        to_chrome, self._out = os.pipe()
        self._in, from_chrome = os.pipe()
        # fds 3 and 4 in chromium; a bash wrapper moves them there (ours are >= 10: no clash)
        ends = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_chrome, from_chrome)]
        os.close(to_chrome)
        os.close(from_chrome)
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{ends[0]} 4>&{ends[1]} {ends[0]}<&- {ends[1]}>&-', binary, *FLAGS,
             "--remote-debugging-pipe", "about:blank"],
            pass_fds=ends, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for fd in ends:
            os.close(fd)
        self._buffer = b""
        self._next_id = 0
        self._page: tuple[str, str, str, tuple[int, int]] | None = None  # target, session, folder, size
        self.events: list[dict] = []

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise TimeoutError(f"chromium did not answer within {TIMEOUT_S} s")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise RuntimeError(f"chromium exited (code {self.proc.poll()})")
            self._buffer += chunk
        record, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(record)

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             deadline: float | None = None) -> dict:
        """Send one command and return its result; events that arrive meanwhile go to :attr:`events`."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S if deadline is None else deadline
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"chromium: {method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, session: str, deadline: float) -> None:
        while not any(e.get("method") == method and e.get("sessionId") == session for e in self.events):
            self.events.append(self._read(deadline))

    def _tab(self, folder: str, width: int, height: int, deadline: float) -> str:
        """The session of a tab for a page of ``folder``, its window ``width`` × ``height``. The
        pages of one folder share a tab (resized as asked), so its renderer compiles their
        plotly.min.js once; a page of another folder gets a new tab (a fresh renderer: a tab that
        drew many pages pays more for each next one)."""
        if self._page is not None and self._page[2] != folder:
            self.call("Target.closeTarget", {"targetId": self._page[0]}, deadline=deadline)
            self._page = None
        if self._page is None:
            target = self.call("Target.createTarget", {"url": "about:blank", "newWindow": True, "width": width,
                                                       "height": height}, deadline=deadline)["targetId"]
            session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                deadline=deadline)["sessionId"]
            for method in ("Page.enable", "Runtime.enable"):
                self.call(method, session=session, deadline=deadline)
            self._page = (target, session, folder, (width, height))
        target, session, _, size = self._page
        if size != (width, height):
            window = self.call("Browser.getWindowForTarget", {"targetId": target}, deadline=deadline)["windowId"]
            self.call("Browser.setWindowBounds", {"windowId": window, "bounds": {"width": width, "height": height}},
                      deadline=deadline)
            self._page = (target, session, folder, (width, height))
        return session

    def load(self, uri: str, size: str, shot: Path) -> tuple[str, list[str]]:
        """Open ``uri`` in a ``size`` ("W,H") window, let it run for the virtual time budget,
        screenshot it to ``shot``; return its DOM (as ``--dump-dom`` prints it) and its console
        lines (``CONSOLE: text``; an uncaught exception as ``CONSOLE: Uncaught ...``)."""
        width, height = (int(v) for v in size.split(","))
        deadline = time.monotonic() + TIMEOUT_S
        try:
            session = self._tab(uri.rsplit("/", 1)[0], width, height, deadline)
            # the previous page's virtual time is spent (paused): let time run for this one
            self.call("Emulation.setVirtualTimePolicy", {"policy": "advance"}, session, deadline)
            self.events = []
            # as headless chromium's --virtual-time-budget: once the page has loaded, its timers
            # run on virtual time until the budget is spent
            self.call("Page.navigate", {"url": uri}, session, deadline)
            self.wait_for("Page.loadEventFired", session, deadline)
            self.call("Emulation.setVirtualTimePolicy", {"policy": "pauseIfNetworkFetchesPending",
                                                         "budget": VIRTUAL_TIME_BUDGET}, session, deadline)
            self.wait_for("Emulation.virtualTimeBudgetExpired", session, deadline)
            dom = self.call("Runtime.evaluate", {"expression": "(document.doctype ? new XMLSerializer()"
                                                 ".serializeToString(document.doctype) + '\\n' : '') + "
                                                 "document.documentElement.outerHTML", "returnByValue": True},
                            session, deadline)
            assert "value" in dom.get("result", {}), ("the page's DOM could not be read", dom)
            dom = dom["result"]["value"]
            png = self.call("Page.captureScreenshot", {"format": "png"}, session, deadline)["data"]
        except BaseException:
            self.close()  # a browser in an unknown state is not reused
            raise
        shot.write_bytes(base64.b64decode(png))
        console = []
        for event in self.events:
            params = event.get("params", {})
            if event.get("method") == "Runtime.consoleAPICalled":
                console.append("CONSOLE: " + " ".join(str(a.get("value", a.get("description", "")))
                                                      for a in params.get("args", [])))
            elif event.get("method") == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                described = details.get("exception", {}).get("description") or details.get("text", "")
                console.append("CONSOLE: " + (described if described.startswith("Uncaught")
                                              else f"{details.get('text', 'Uncaught')} {described}"))
        self.events = []
        return dom, console

    def close(self) -> None:
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for fd in (self._in, self._out):
            try:
                os.close(fd)
            except OSError:
                pass


_SHARED: list[Chromium] = []


def browser() -> Chromium:
    """This process's chromium, started on first use (and again if it died); skips the test when
    there is no chromium."""
    binary = chromium()
    if binary is None:
        pytest.skip("no chromium binary on PATH (.ci/run installs Debian's chromium); the browser check did not run")
    if not _SHARED or not _SHARED[0].alive():
        if _SHARED:
            _SHARED.pop().close()
        _SHARED.append(Chromium(binary))
        atexit.register(_SHARED[0].close)
    return _SHARED[0]


def load(page: Path, shot: Path, size: str) -> tuple[str, list[str]]:
    """``page`` (a file) opened in :func:`browser` at ``size``, screenshot to ``shot``: its DOM and
    its console lines (:meth:`Chromium.load`)."""
    shot.parent.mkdir(parents=True, exist_ok=True)
    return browser().load(page.resolve().as_uri(), size, shot)


def page_errors(console: list[str]) -> list[str]:
    """The console lines that report a page error (the measuring script's ``PAGE_ERROR``, an uncaught exception)."""
    return [line for line in console if "PAGE_ERROR" in line or "Uncaught" in line]


def render(page: Path, shot: Path, size: str = "1400,1800") -> dict:
    """Render ``page`` (a file; a measured copy is written next to it), screenshot it to ``shot``
    and return the measurements plus ``errors`` (page errors on the console)."""
    text = page.read_text(encoding="utf-8")
    measured = page.with_name(page.stem + ".measured.html")
    head = re.search(r"<head[^>]*>", text, flags=re.I)
    measured.write_text(text[: head.end()] + _MEASURE + text[head.end():] if head else _MEASURE + text,
                        encoding="utf-8")
    dom, console = load(measured, shot, size)
    found = re.search(r'<pre id="layout-check">(.*?)</pre>', dom, flags=re.S)
    assert found, "the measuring script did not run"
    result = json.loads(unescape(found.group(1)))
    result["errors"] = page_errors(console)
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
