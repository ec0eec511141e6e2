"""The one page writer: sections in order, plotly.js inlined once in the head (only with a
figure), named figure divs, the shared style; and a page of figures and a wide table that a real
browser draws with nothing cut off."""

from __future__ import annotations

import re

import plotly.graph_objects as go

from interp_rand.figures.html_page import (PLOTLY_FILE, STYLE, Headline, asset_folder, page_html, write_figure,
                                          write_page)
from interp_rand.figures.style import VERDICT_COLOURS

PLOTLY_BANNER = re.compile(r"\* plotly\.js v\d")


def bars(title: str) -> go.Figure:
    fig = go.Figure(go.Bar(x=["a", "b", "c"], y=[0.2, 0.5, 0.9], text=["0.2", "0.5", "0.9"], textposition="outside"))
    return fig.update_layout(title=title, height=360, yaxis={"range": [0, 1.1]})


def test_sections_in_order_and_plotly_once_in_the_head():
    page = page_html("a <title> & more", ["<p id='first'>claims</p>", bars("one"), ("named", bars("two")),
                                         "<p id='last'>end</p>"])
    head, body = page.split("<body>")
    assert len(PLOTLY_BANNER.findall(page)) == 1 and PLOTLY_BANNER.search(head)  # once, in the head
    assert "<script src=" not in page  # nothing fetched: works offline
    assert "<title>a &lt;title&gt; &amp; more</title>" in head and STYLE in head
    assert body.count("Plotly.newPlot") == 2 and page.count("<body>") == 1
    order = [body.index(s) for s in ("<h1>a &lt;title&gt; &amp; more</h1>", "id='first'", 'id="fig0"', 'id="named"',
                                     "id='last'")]
    assert order == sorted(order)


def test_a_page_without_figures_carries_no_plotly_and_options_apply(tmp_path):
    path = write_page(tmp_path / "deep" / "index.html", "index", ["<p>text</p>"], heading=False,
                      style=".x { color: red; }")
    page = path.read_text(encoding="utf-8")
    assert "plotly" not in page.lower() and "<h1>" not in page and ".x { color: red; }" in page
    assert page.index(STYLE) < page.index(".x { color: red; }")  # page rules come after the shared ones


def test_one_figure_page_is_titled_by_its_figure_and_loads_the_folders_plotly(tmp_path):
    page = write_figure(bars("usage<br>per node"), tmp_path / "f.html").read_text(encoding="utf-8")
    assert "<title>usage per node</title>" in page and "<h1>" not in page
    assert page.count("Plotly.newPlot") == 1 and not PLOTLY_BANNER.search(page)  # not inlined
    assert "src='plotly.min.js'" in page and PLOTLY_BANNER.search((tmp_path / PLOTLY_FILE).read_text())


def test_pages_of_one_folder_share_one_plotly_file(tmp_path):
    with asset_folder(tmp_path):
        write_figure(bars("a"), tmp_path / "a.html")
        before = (tmp_path / PLOTLY_FILE).stat().st_mtime_ns
        deep = write_page(tmp_path / "step" / "inner" / "b.html", "b", [bars("b")]).read_text(encoding="utf-8")
    assert "src='../../plotly.min.js'" in deep
    assert (tmp_path / PLOTLY_FILE).stat().st_mtime_ns == before  # written once, not per page
    assert sorted(p.name for p in tmp_path.rglob("*.js")) == [PLOTLY_FILE]
    # outside the block a page in a sub-folder gets its own folder's copy
    alone = write_figure(bars("c"), tmp_path / "other" / "c.html").read_text(encoding="utf-8")
    assert "src='plotly.min.js'" in alone and (tmp_path / "other" / PLOTLY_FILE).is_file()


def test_a_staged_page_loads_the_plotly_of_the_folder_it_is_moved_into(tmp_path):
    from interp_rand.output import replace_files

    with replace_files(tmp_path, ["report.html"]) as stage:
        write_figure(bars("a"), stage / "report.html")
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "src='plotly.min.js'" in page and (tmp_path / PLOTLY_FILE).is_file()
    assert {PLOTLY_FILE, "report.html"} <= {p.name for p in tmp_path.iterdir()}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp")]  # the stage moved in, nothing left


def test_the_headline_comes_first_with_its_verdict_coloured():
    page = page_html("card", [bars("x")], headline=Headline("edges recover the logit difference",
                                                           "recovers 0.99 · 78 edges", "fails",
                                                           failing="minimality: 12 edges not needed", link="card.html"))
    body = page.split("<body>")[1]
    assert body.index("class='headline'") < body.index('id="fig0"')
    assert "FAILS" in body and VERDICT_COLOURS["fails"] in body and "minimality" in body and "href='card.html'" in body
    bare = Headline("loss", "0.12 at step 500").html()
    assert "class='verdict'" not in bare and "<br>" not in bare  # no verdict word, one line


def test_a_headline_refuses_an_unknown_verdict():
    import pytest

    with pytest.raises(ValueError, match="allowed holds, fails, inconclusive"):
        Headline("x", "1", "passes")


def test_a_page_of_figures_and_a_wide_table_in_a_browser(tmp_path):
    import browser

    cells = "".join(f"<td>{i * 1.25:.3f} a long cell</td>" for i in range(40))
    table = f"<div class='scroll'><table><tr>{cells}</tr></table></div>"
    wide = bars("wider than the window").update_layout(width=1600)
    page = write_page(tmp_path / "page.html", "two figures", ["<ul><li>a claim</li></ul>", table, bars("first"),
                                                             ("second", bars("second")), wide])
    result = browser.render(page, browser.screenshot_path(tmp_path, "page.png"), "1200,1400")
    # no page error, nothing outside a figure, no page-wide scroll (the wide figure scrolls in its box)
    browser.assert_readable(result, figures=3)
    assert set(result["figures"]) == {"fig0", "second", "fig2"}
    assert result["figures"]["second"]["xticks"] == ["a", "b", "c"]
    assert result["figures"]["fig2"]["width"] == 1600  # kept at its own width, not squeezed


def test_the_first_look_check_passes_a_good_page_and_catches_each_fault(tmp_path):
    import browser
    import pytest

    table = "<div class='scroll'><table><tr><td>1</td></tr></table></div>"
    head = Headline("bars measured", "0.9", "holds")

    def look(name, sections, **options):
        page = write_page(tmp_path / f"{name}.html", name, sections, **options)
        return browser.first_look(page, browser.screenshot_path(tmp_path, f"{name}.png"))

    browser.assert_first_look(look("good", [bars("a"), table], headline=head))
    faults = {"no headline": look("bare", [bars("a")]),
              "scrolls sideways": look("wide", [bars("a").update_layout(width=1600)], headline=head),
              "figures before tables": look("table-first", [table, bars("a")], headline=head)}
    for fault, result in faults.items():
        with pytest.raises(AssertionError):
            browser.assert_first_look(result)
    with pytest.raises(AssertionError, match="budget"):
        browser.assert_first_look(look("heavy", [bars("a")], headline=head), budget=1000)
