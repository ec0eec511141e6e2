"""The demo's ``index.html``: one section per step with its command, its verdict, its key numbers
(read from the JSON files the step wrote) and a link to every file it wrote (drawing only: it
reads what the steps left in their folders).

A step's verdict is one word over every claim its JSON files state (a file with a top-level
``"claims"`` list, as case studies, comparisons and claim cards write): FAILS when any claim
fails, HOLDS when every claim holds, else INCONCLUSIVE; each failing claim gets one line naming
its file, the claim and why it fails. Such files show their claims instead of raw key numbers."""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from interp_rand.figures.headline import Headline, overall_verdict
from interp_rand.figures.html_page import page_html
from interp_rand.figures.style import verdict_colour

PRINTED = "printed.txt"  # a step's printed output (interp_rand.demo writes it), shown when it wrote nothing else

# Shown first when a step's JSON has them (top level or one level down); then other numbers.
KEY_NUMBERS = ("exact_match", "average", "worst_5pct", "recovered", "n_edges", "jaccard", "n_shared", "n_only_a",
               "n_only_b", "spearman_shared", "carry_removed", "control_mean", "summary")
MAX_NUMBERS = 8
# the index's own rules, after the shared style (html_page.STYLE)
_STYLE = """
body { margin: 2em auto; max-width: 72em; padding: 0 1em; }
section { border: 1px solid #ddd; border-radius: 6px; padding: 0.6em 1em; margin: 1em 0; }
h2 { font-size: 1.1em; margin: 0.2em 0; } code { background: #f4f4f4; padding: 1px 4px; word-break: break-all; }
.files a { margin-right: 1.2em; }
table { font-size: 0.9em; margin: 0.5em 0; }
td { border: 1px solid #ddd; padding: 2px 8px; text-align: left; } td.v { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: #666; font-size: 0.9em; }
ol.overview { margin: 0.4em 0 1em 0; padding-left: 1.6em; line-height: 1.5; }
ol.overview .muted { font-size: 0.85em; }
pre.printed { background: #f7f7f7; padding: 0.5em; font-size: 0.85em; overflow-x: auto; white-space: pre; word-break: normal; }
ul.failing { margin: 0.2em 0 0.5em 0; font-size: 0.9em; }
"""
VERDICT_ORDER = ("fails", "inconclusive", "holds")


def _flatten(value: Any, prefix: str, depth: int = 2) -> list[tuple[str, Any]]:
    """``(dotted key, number or short string)`` of a JSON value, ``depth`` levels of dicts deep."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, (int, float)):
        return [(prefix, value)]
    if isinstance(value, dict) and depth > 0:
        return [item for k, v in value.items() for item in _flatten(v, f"{prefix}.{k}" if prefix else str(k), depth - 1)]
    return []


def key_numbers(data: dict[str, Any]) -> list[tuple[str, Any]]:
    """Up to :data:`MAX_NUMBERS` numbers of one JSON output, :data:`KEY_NUMBERS` first."""
    preferred = [item for key in KEY_NUMBERS if key in data for item in _flatten(data[key], key)]
    rest = [item for key, v in data.items() if key not in KEY_NUMBERS for item in _flatten(v, key, depth=1)]
    return (preferred + rest)[:MAX_NUMBERS]


def side_by_side(data: Any) -> tuple[list[str], list[tuple[str, list[Any]]]] | None:
    """A JSON output comparing models (a ``summary`` of two or more per-model dicts, as the
    randomness report writes): ``(model names, [(key, one number per model)])`` for the first
    :data:`MAX_NUMBERS` numbers every model has, so a model is never shown without its twin."""
    summary = data.get("summary") if isinstance(data, dict) else None
    if not (isinstance(summary, dict) and len(summary) >= 2 and all(isinstance(v, dict) for v in summary.values())):
        return None
    models = list(summary)
    first = summary[models[0]]
    keys = [k for k, v in first.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
            and all(isinstance(summary[m].get(k), (int, float)) for m in models)]
    return (models, [(k, [summary[m][k] for m in models]) for k in keys[:MAX_NUMBERS]]) if keys else None


def _twins_table(name: str, twins: tuple[list[str], list[tuple[str, list[Any]]]]) -> str:
    models, rows = twins
    head = "".join(f"<th>{html.escape(m)}</th>" for m in models)
    body = "".join(f"<tr><td>{html.escape(k)}</td>" + "".join(f"<td class='v'>{_format(v)}</td>" for v in values)
                   + "</tr>" for k, values in rows)
    return f"<div class='scroll'><table><tr><th>{html.escape(name)}</th>{head}</tr>{body}</table></div>"


def _format(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) else str(v)


def _claims(data: Any) -> list[dict[str, Any]]:
    """The claims a JSON output states (its top-level ``"claims"`` list of dicts with a verdict)."""
    claims = data.get("claims") if isinstance(data, dict) else None
    return [c for c in claims if isinstance(c, dict) and "verdict" in c] if isinstance(claims, list) else []


def _failing_line(name: str, data: dict[str, Any], claim: dict[str, Any]) -> str:
    """``card.json (the carry card): the circuit is learned ... — below the floor 0.5 (0.261 vs ...)``."""
    what = f"{name} ({data['subject']})" if isinstance(data.get("subject"), str) else name
    text = claim.get("line") or f"claim: {claim.get('claim')} — FAILS: {claim.get('reason')}"
    return f"{what}: {text.removeprefix('claim: ')}"


def _judged(folder: Path) -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    """``(file name, its JSON, its claims)`` for every JSON output under ``folder`` stating claims."""
    out = []
    for path in sorted(folder.rglob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if _claims(data):
            out.append((path.name, data, _claims(data)))
    return out


def verdict_lines(folder: str | Path) -> list[str]:
    """A step's verdict as text: ``FAILS (9 claims in 2 file(s): 2 fail, 1 inconclusive, 6 holds)``
    then one line per failing claim (an INCONCLUSIVE step: per inconclusive claim, saying why);
    ``[]`` when the step states no claims."""
    judged = _judged(Path(folder))
    claims = [c for _, _, cs in judged for c in cs]
    word = overall_verdict(claims)
    if word is None:
        return []
    counts = {v: sum(c["verdict"] == v for c in claims) for v in VERDICT_ORDER}
    tally = ", ".join(f"{counts[v]} {'fail' if v == 'fails' else v}" for v in VERDICT_ORDER)
    return [f"{word.upper()} ({len(claims)} claims in {len(judged)} file(s): {tally})",
            *(_failing_line(name, data, c) for name, data, cs in judged for c in cs
              if c["verdict"] == ("fails" if word == "fails" else "inconclusive"))]


def _verdict_block(folder: Path) -> str:
    lines = verdict_lines(folder)
    if not lines:
        return "<p class='verdict muted'>no claims to judge</p>"
    word, _, tally = lines[0].partition(" ")
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines[1:])
    return (f"<p class='verdict'><b class='{word.lower()}' style='color:{verdict_colour(word)}'>{word}</b> "
            f"<span class='muted'>{html.escape(tally)}</span>"
            "</p>" + (f"<ul class='failing'>{items}</ul>" if items else ""))


def _json_files(files: list[Path]) -> Iterator[tuple[Path, Any]]:
    """``(path, parsed JSON)`` of each readable JSON file among ``files``."""
    for path in files:
        if path.suffix != ".json":
            continue
        try:
            yield path, json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue


def _held(files: list[Path], pick: Any) -> list[str]:
    """The distinct lines ``pick(holder)`` gives for each JSON in ``files``, its top level and
    its ``mechanism`` (a case study nests the mechanism's report there)."""
    out = []
    for _, data in _json_files(files):
        for holder in (data, data.get("mechanism")) if isinstance(data, dict) else ():
            line = pick(holder) if isinstance(holder, dict) else None
            if isinstance(line, str) and line and line not in out:
                out.append(line)
    return out


def rival_headlines(files: list[Path]) -> list[str]:
    """The headline of each mechanism's comparison with its rivals in ``files`` (a JSON's
    ``rivals``, top level or under ``mechanism``): which one wins, by which experiment."""
    return _held(files, lambda h: h["rivals"].get("headline") if isinstance(h.get("rivals"), dict) else None)


def shortfalls(files: list[Path]) -> list[str]:
    """Where each claim-stating result in ``files`` falls short, one measured line each (a
    JSON's ``shortfall``, top level or under ``mechanism``; a result that holds has none)."""
    return _held(files, lambda h: h.get("shortfall"))


def _step_files(out: Path, step: dict[str, Any]) -> list[Path]:
    folder = out / step["folder"]
    return sorted(p for p in folder.rglob("*") if p.suffix in (".html", ".json") and ".measured" not in p.name) \
        if folder.is_dir() else []


def findings(out: Path, steps: list[dict[str, Any]]) -> list[str]:
    """What each randomized model learned, one sentence each: the ``finding`` of each step's
    randomness report (:meth:`interp_rand.reports.randomness.RandomnessReport.finding`)."""
    lines = []
    for step in steps:
        folder = out / step["folder"]
        files = sorted(folder.rglob("*.json")) if folder.is_dir() else []
        lines += [data["finding"] for _, data in _json_files(files)
                  if isinstance(data, dict) and isinstance(data.get("finding"), str)]
    return lines


def _rivals_block(files: list[Path]) -> str:
    lines = rival_headlines(files)
    return "".join(f"<p class='rivals'><b>Against its rivals:</b> {html.escape(line)}</p>" for line in lines)


def _shortfall_block(lines: list[str]) -> str:
    return "".join(f"<p class='shortfall'><b>Where it falls short:</b> {html.escape(line)}</p>" for line in lines)


def _step(out: Path, step: dict[str, Any], files: list[Path], short: list[str]) -> str:
    """A step's section (``files``: :func:`_step_files`; ``short``: its :func:`shortfalls`)."""
    folder = out / step["folder"]
    rows, compared = [], []
    for path, data in _json_files(files):
        if _claims(data):  # its claims speak for it (the verdict block), not its raw numbers
            continue
        twins = side_by_side(data)
        if twins:
            compared.append(_twins_table(path.name, twins))
            continue
        numbers = key_numbers(data) if isinstance(data, dict) else []
        rows += [f"<tr><td>{html.escape(path.name)}</td><td>{html.escape(k)}</td><td class='v'>{_format(v)}</td></tr>"
                 for k, v in numbers]
    links = " ".join(f'<a href="{html.escape(p.relative_to(out).as_posix())}">{html.escape(p.name)}</a>'
                     for p in sorted(files, key=lambda p: (p.suffix != ".html", p.name)))
    table = f"<div class='scroll'><table>{''.join(rows)}</table></div>" if rows else ""
    table = "".join(compared) + table
    printed = folder / PRINTED
    if not files and printed.is_file():  # a step that only prints (zoo list): what it printed
        table = f"<pre class='printed'>{html.escape(printed.read_text(encoding='utf-8').strip())}</pre>"
    return (f"<section id='step-{html.escape(step['folder'], quote=True)}'><h2>{html.escape(step['what'])}</h2>"
            f"<p class='muted'>{step['seconds']} s &middot; <code>{html.escape(step['command'])}</code></p>"
            f"{_verdict_block(folder)}{_shortfall_block(short)}{_rivals_block(files)}{table}" + (f"<p class='files'>{links}</p>" if links else "")
            + "</section>")


def step_words(out: Path, steps: list[dict[str, Any]]) -> dict[str, str | None]:
    """Each step's one word over the claims its folder's JSON files state (None: no claims)."""
    return {step["folder"]: overall_verdict([c for _, _, cs in _judged(out / step["folder"]) for c in cs])
            for step in steps}


def _overview(steps: list[dict[str, Any]], words: dict[str, str | None], short: dict[str, list[str]]) -> str:
    """One line per step, its verdict word coloured, linking to its section; a step that does
    not hold adds where it falls short (``short``: each folder's :func:`shortfalls`)."""
    items = []
    for step in steps:
        word = words[step["folder"]]
        mark = (f"<b style='color:{verdict_colour(word)}'>{word.upper()}</b>" if word
                else "<span class='muted'>no claims</span>")
        lines = short[step["folder"]] if word and word != "holds" else []
        items.append(f"<li>{mark} · <a href='#step-{html.escape(step['folder'], quote=True)}'>"
                     f"{html.escape(step['folder'])}</a> <span class='muted'>{html.escape(step['what'])}</span>"
                     + "".join(f"<br><span class='shortfall'>falls short: {html.escape(line)}</span>" for line in lines)
                     + "</li>")
    return f"<ol class='overview'>{''.join(items)}</ol>"


def tour_headline(steps: list[dict[str, Any]], words: dict[str, str | None]) -> Headline:
    """The index's headline (``words``: :func:`step_words`): how many steps state claims, how
    many fail, and which (by name)."""
    judged = {f: w for f, w in words.items() if w is not None}
    if not judged:
        return Headline(f"the tour's {len(steps)} steps", "no step states a claim")
    counts = {v: sum(w == v for w in judged.values()) for v in VERDICT_ORDER}
    word = overall_verdict(judged.values())
    number = (f"{len(judged)} of {len(steps)} steps state claims: "
              + ", ".join(f"{counts[v]} {v}" for v in VERDICT_ORDER if counts[v]))
    failing = [f for f, w in judged.items() if w != "holds"]
    return Headline("the tour's verdicts", number, word,
                    failing=("not holding: " + ", ".join(f"{f} ({judged[f]})" for f in failing)) if failing else None)


def demo_index(out: str | Path, steps: list[dict[str, Any]], title: str = "interp-rand demo: the zoo's trained models") -> str:
    """The page: ``steps`` as :func:`interp_rand.demo.run_tour` records them (``folder``,
    ``what``, ``command``, ``seconds``), each folder under ``out``."""
    out = Path(out)
    intro = ("<p class='muted'>Each step's command, its verdict over the claims it states (FAILS when any claim "
             "fails, with one line per failing claim saying why; HOLDS when all hold; else INCONCLUSIVE), its key "
             "numbers (from the JSON it wrote) and every file it wrote; the figures are offline HTML.</p>")
    words = step_words(out, steps)  # each folder's JSON read once for the overview and the headline
    learned = findings(out, steps)
    block = ("<h2>What the randomized models learned</h2><ul>" + "".join(f"<li>{html.escape(t)}</li>" for t in learned)
             + "</ul>") if learned else ""
    files = {step["folder"]: _step_files(out, step) for step in steps}  # each step's outputs listed once
    short = {folder: shortfalls(found) for folder, found in files.items()}
    sections = "".join(_step(out, step, files[step["folder"]], short[step["folder"]]) for step in steps)
    return page_html(title, [block, _overview(steps, words, short), intro, sections],
                     style=_STYLE, headline=tour_headline(steps, words))


__all__ = ["PRINTED", "demo_index", "findings", "key_numbers", "rival_headlines", "shortfalls", "side_by_side", "step_words", "tour_headline", "verdict_lines"]
