"""``interp-rand demo``: the tour runs every step on the zoo and links its figures; ``--train``
trains, evaluates and draws the training curves."""

from __future__ import annotations

import functools
import html
import json
import re

import pytest

from mechanism_sizes import small_mechanisms

from interp_rand import demo
from interp_rand.cli.main import main
from interp_rand.training import TrainConfig


# The tour's commands on their smallest settings: what each command computes is checked by its
# own tests (the carry claims in tests/interp_rand/reports/test_case_studies_zoo.py, the seed usage in
# tests/circuits/analyses/test_randomness_zoo.py, the addition model's accuracy in tests/interp_rand/zoo/test_zoo.py);
# this test checks what only the tour does: every step runs in order, each into its own folder,
# and the index links what each one wrote.
SMALL = {"eval": {"--n": "100"}, "case-study": {"--n": "100", "--controls": "2", "--card-resamples": "1"},
         "report": {"--n-examples": "32", "--n-probe-examples": "64", "--n-attribution-examples": "2"},
         "randomness": {"--n": "8", "--stored-inputs": "1"}, "compare": {"--n": "8", "--controls": "1"},
         "gridworld": {"--seeds": "2", "--route-seeds": "40"}, "explain": {"--n": "100"}}
# what the carry study's CLI does not set: its pairs, cascades and probe problems
SMALL_CARRY = {"n_pairs": 32, "n_cascade": 32, "n_probe": 200}
# what the claim cards' CLI does not set: their random circuits and the sizes MIB's integrals
# sum over (the card's rules are tested in tests/circuits/analyses/test_claim_card_and_stability.py)
SMALL_CARD = {"n_random": 4, "fractions": (0.01, 0.1, 1.0)}
# the page (or file) each step must write, under its folder
WRITES = {"addition": "eval.json", "carry": "case_study.html", "sort": "case_study.html",
          "recall-seed": "case_study.html", "coloring-seed": "case_study.html", "report": "report.html",
          "randomness": "randomness.html", "recall": "randomness.html", "compare": "comparison.html",
          "gridworld": "route.html", "explain": "explain.html", "explain-seed": "explain.html"}


def smallest(argv: list[str]) -> list[str]:
    """``argv`` with :data:`SMALL`'s values for its command (replaced, or appended)."""
    argv = list(argv)
    for option, value in SMALL.get(argv[0], {}).items():
        if option in argv:
            argv[argv.index(option) + 1] = value
        else:
            argv += [option, value]
    return argv


@pytest.mark.slow
def test_tour_runs_every_step_on_the_zoo(tmp_path, monkeypatch, capsys):
    from circuits.analyses import claim_card
    from interp_rand.reports import case_studies

    tour = [(folder, what, smallest(argv)) for folder, what, argv in demo.TOUR]
    monkeypatch.setattr(demo, "TOUR", tour)
    monkeypatch.setattr(case_studies, "CarryConfig", functools.partial(case_studies.CarryConfig, **SMALL_CARRY))
    monkeypatch.setattr(claim_card, "claim_card", functools.partial(claim_card.claim_card, **SMALL_CARD))
    small_mechanisms(monkeypatch)
    assert main(["demo", "--jobs", "2", "--out", str(tmp_path)]) == 0  # side by side, as on 2 idle cores
    printed = capsys.readouterr().out
    steps = json.loads((tmp_path / "tour.json").read_text())
    # every step, in the tour's order, each shown as a user would type it, writing into its own folder
    assert [s["folder"] for s in steps] == [folder for folder, _, _ in tour]
    positions = [printed.index(s["command"]) for s in steps]
    assert positions == sorted(positions)  # printed one after the other, in order
    for step, (folder, _, argv) in zip(steps, tour):
        assert step["command"].startswith("interp-rand --threads 1 " + argv[0])
        if "OUT" in " ".join(argv):
            assert str(tmp_path / folder) in step["command"]  # OUT is the step's own folder
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == sorted([*WRITES, "zoo"])
    assert "sort" in (tmp_path / "zoo" / "printed.txt").read_text()  # zoo list only prints: what it printed is kept
    # the index: one section per step, a link to every file the steps wrote, their key numbers
    index = (tmp_path / "index.html").read_text()
    assert index.count("<section id=") == len(steps)
    for folder, name in WRITES.items():
        assert (tmp_path / folder / name).is_file(), (folder, name)
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")
                     if p.suffix in (".html", ".json") and p.parent != tmp_path)
    assert written and all(f'href="{name}"' in index for name in written)
    # every figure page opens offline, loading the folder's one plotly.js by a relative path
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.js")] == ["plotly.min.js"]
    for name in written:
        page = (tmp_path / name)
        if name.endswith(".html") and "Plotly.newPlot" in page.read_text():
            srcs = re.findall(r"<script[^>]*src='([^']+)'", page.read_text())
            assert srcs and all((page.parent / src).resolve() == tmp_path / "plotly.min.js" for src in srcs), name
    assert "exact_match" in index  # read from addition/eval.json
    # each flagship's step names the mechanism that wins over its rivals
    assert index.count("Against its rivals:") == 4 and "carry wins over carry-ripple" in index
    assert "class='headline'" in index and "the tour&#x27;s verdicts" in index
    # it leads with what each randomized model learned, one sentence each, from its report
    assert index.index("What the randomized models learned") < index.index("<section id=")
    assert "zoo:recall-Aq_R&#x27;s seed decides its success" in index and "random hash of its key codes" in index
    assert "zoo:coloring-Aq_R&#x27;s seed decides its success" in index and "its noise decides" in index


def _fake_tour(monkeypatch, log):
    """A tour of fake steps: each sleeps, prints, writes a file and logs when it ran."""
    import time

    tour = [(name, f"step {name}", ["fake", name, "--out", "OUT"])
            for name in ("zoo", "carry", "sort", "addition", "report", "nope")]
    monkeypatch.setattr(demo, "TOUR", tour)

    def fake_main(argv):
        name, out = argv[3], argv[5]
        with open(log, "a") as f:
            f.write(f"start {name} {time.time()}\n")
        time.sleep({"carry": 0.6, "sort": 0.4}.get(name, 0.1))
        print(f"output of {name}")
        from pathlib import Path

        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "result.json").write_text(json.dumps({"name": name}))
        with open(log, "a") as f:
            f.write(f"end {name} {time.time()}\n")
        return 3 if name == "fail" else 0

    return tour, fake_main


@pytest.mark.parametrize("jobs", [1, 2])
def test_tour_side_by_side_prints_in_order_and_keeps_carry_and_sort_apart(jobs, tmp_path, monkeypatch, capsys):
    tour, fake_main = _fake_tour(monkeypatch, tmp_path / "log.txt")
    steps = demo.run_tour(tmp_path / "out", fake_main, jobs=jobs)
    printed = capsys.readouterr().out
    assert [s["folder"] for s in steps] == [name for name, _, _ in tour]
    positions = [printed.index(f"output of {name}") for name, _, _ in tour]
    assert positions == sorted(positions)  # each step's output after its command, in the tour's order
    for name, _, _ in tour:
        assert printed.index(f"$ interp-rand --threads 1 fake {name}") < printed.index(f"output of {name}")
        assert (tmp_path / "out" / name / "printed.txt").read_text() == f"output of {name}\n"
    times = {}
    for line in (tmp_path / "log.txt").read_text().splitlines():
        what, name, at = line.split()
        times.setdefault(name, {})[what] = float(at)
    carry, sort = times["carry"], times["sort"]
    assert carry["end"] <= sort["start"] or sort["end"] <= carry["start"]  # never together
    overlapped = any(a != b and times[a]["start"] < times[b]["end"] and times[b]["start"] < times[a]["end"]
                     for a in times for b in times)
    assert overlapped == (jobs == 2)


def test_tour_side_by_side_stops_at_a_failed_step(tmp_path, monkeypatch, capsys):
    tour, fake_main = _fake_tour(monkeypatch, tmp_path / "log.txt")
    monkeypatch.setattr(demo, "TOUR", [*tour[:2], ("fail", "a failing step", ["fake", "fail", "--out", "OUT"])])
    with pytest.raises(RuntimeError, match="demo step failed \\(3\\): interp-rand --threads 1 fake fail"):
        demo.run_tour(tmp_path / "out", fake_main, jobs=2)
    assert not (tmp_path / "out" / "tour.json").exists()


def test_train_demo_trains_evaluates_and_draws(tmp_path, monkeypatch, capsys):
    tiny = TrainConfig(steps=4, batch_size=16, lr=3e-3, warmup_steps=1, eval_every=2, eval_size=32,
                       checkpoint_every=4)
    runs = {"sort": {"task": {"name": "sort", "length": 3, "vocab": 5}, "model": {"d_model": 16, "n_layers": 1},
                     "train": tiny, "eval": {"fresh": 64}},
            "addition": {"task": {"name": "addition", "n_digits": 1}, "model": {"d_model": 16, "n_layers": 1},
                         "train": tiny, "eval": {"exhaustive": True}}}
    monkeypatch.setattr(demo, "DEMO_RUNS", runs)
    assert main(["demo", "--train", "--quiet", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["addition"]["evaluated_on"] == "all 100 problems" and summary["sort"]["step"] == 4
    assert "Plotly.newPlot" in (tmp_path / "training_curves.html").read_text()
    assert "exact match" in capsys.readouterr().out


def test_index_shows_each_steps_key_numbers_and_links_every_output(tmp_path):
    import browser

    from interp_rand.figures.demo_index import demo_index

    (tmp_path / "addition").mkdir()
    (tmp_path / "addition" / "eval.json").write_text(json.dumps(
        {"checkpoint": "/abs/path", "exact_match": 0.99991, "per_position": [1.0, 0.99], "n": 100000}))
    (tmp_path / "compare").mkdir()
    (tmp_path / "compare" / "comparison.json").write_text(json.dumps(
        {"jaccard": 0.25, "n_shared": 12, "cross_faithfulness": {"a_on_b": 0.5}}))
    (tmp_path / "compare" / "comparison.html").write_text("<html><body>figure</body></html>")
    steps = [{"folder": "addition", "what": "the addition model", "command": "interp-rand eval zoo:addition " + "x" * 300,
              "seconds": 1.5},
             {"folder": "compare", "what": "two circuits", "command": "interp-rand compare a b", "seconds": 2.0},
             {"folder": "zoo", "what": "the zoo", "command": "interp-rand zoo list", "seconds": 0.1}]
    page = demo_index(tmp_path, steps)
    for needle in ('href="addition/eval.json"', 'href="compare/comparison.html"', 'href="compare/comparison.json"',
                   "exact_match", "0.9999", "jaccard", "0.25", "n_shared", "cross_faithfulness.a_on_b", "100,000"):
        assert needle in page, needle
    assert "/abs/path" not in page  # strings are not key numbers
    assert "no step states a claim" in page  # the headline, though no step has a verdict
    index = tmp_path / "index.html"
    index.write_text(page)
    result = browser.render(index, browser.screenshot_path(tmp_path, "index.png"), "1200,900")
    browser.assert_readable(result, figures=0)  # no wider than the window, even with a long command
    assert len(result["tables"]) == 2


def test_index_gives_each_step_one_verdict_and_names_a_failing_claim(tmp_path):
    """A step whose claim card fails shows FAILS and one line naming the failing claim and why,
    not the card's raw numbers; a step whose claims all hold shows HOLDS; one with an
    inconclusive claim INCONCLUSIVE; one without claims none."""
    from interp_rand.verdicts import exceeds, exceeds_on_scale
    from interp_rand.figures.demo_index import demo_index, verdict_lines

    holds = exceeds("ablating the heads hurts", 0.4, 0.1, control_label="random heads").to_dict()
    learned = exceeds_on_scale("the circuit is learned", 0.52, 0.01, 2.0, control_label="the random-init model")
    card = {"subject": "carry study circuit, zoo:addition", "verdict": "fails", "sufficiency": 0.2614,
            "claims": [holds, learned.to_dict()]}
    short = "step 3, the weak vertices' noise split"  # a result that falls short says where, in one line
    for folder, files in {"carry": {"case_study.json": {"claims": [holds], "mechanism": {"shortfall": short}},
                                    "card.json": card},
                          "sort": {"case_study.json": {"claims": [holds, holds], "shortfall": "never shown"}},
                          "coloring": {"card_b.json": {"claims": [holds, exceeds("x", 0.5, None, control_label="c")
                                                                  .to_dict()]}},
                          "addition": {"eval.json": {"exact_match": 0.999}}}.items():
        (tmp_path / folder).mkdir()
        for name, data in files.items():
            (tmp_path / folder / name).write_text(json.dumps(data))
    steps = [{"folder": f, "what": f, "command": f"interp-rand {f}", "seconds": 1.0}
             for f in ("carry", "sort", "coloring", "addition")]
    page = demo_index(tmp_path, steps)
    sections = page.split("<section id=")[1:]
    assert [next(w for w in ("FAILS", "HOLDS", "INCONCLUSIVE", "no claims") if w in s) for s in sections] == \
        ["FAILS", "HOLDS", "INCONCLUSIVE", "no claims"]
    lines = verdict_lines(tmp_path / "carry")
    assert lines[0].startswith("FAILS (3 claims in 2 file(s): 1 fail") and len(lines) == 2
    assert lines[1].startswith("card.json (carry study circuit, zoo:addition): the circuit is learned — FAILS: "
                               "below the floor 0.5")
    assert "the circuit is learned — FAILS: below the floor 0.5" in sections[0]
    inconclusive = verdict_lines(tmp_path / "coloring")  # an inconclusive step names its inconclusive claim
    assert len(inconclusive) == 2 and inconclusive[1].startswith("card_b.json: x — INCONCLUSIVE")
    assert "0.2614" not in page and "exact_match" in sections[3]   # a card's raw rows give way to its claims
    head = page.split("<ol class=")[0]  # the headline: the tour's word, the failing steps named
    assert "data-verdict='fails'" in head and "3 of 4 steps state claims: 1 fails, 1 inconclusive, 1 holds" in head
    assert "carry (fails), coloring (inconclusive)" in head
    overview = re.search(r"<ol class='overview'>(.*?)</ol>", page).group(1)  # one coloured word per step, in order
    assert re.findall(r">(FAILS|HOLDS|INCONCLUSIVE|no claims)<", overview) == ["FAILS", "HOLDS", "INCONCLUSIVE",
                                                                              "no claims"]
    assert "href='#step-carry'" in overview and "id='step-carry'" in page
    # where a step that does not hold falls short: in its overview line and its section; a holding step's is not shown
    assert f"falls short: {html.escape(short)}" in overview and overview.count("falls short") == 1
    assert f"<b>Where it falls short:</b> {html.escape(short)}" in sections[0]
    assert "never shown" not in overview


def test_a_comparison_shows_each_model_beside_its_twin(tmp_path):
    from interp_rand.figures.demo_index import demo_index

    (tmp_path / "randomness").mkdir()
    summary = {"zoo:coloring-Aq_R": {"usage seed": 0.209, "seed enters at": "resid", "only here": 1.0},
               "zoo:coloring-AE_R": {"usage seed": 0.0008}}
    (tmp_path / "randomness" / "randomness.json").write_text(json.dumps({"runs": [], "summary": summary}))
    page = demo_index(tmp_path, [{"folder": "randomness", "what": "r", "command": "interp-rand randomness",
                                  "seconds": 1.0}])
    row = re.search(r"<tr><td>usage seed</td>(.*?)</tr>", page).group(1)
    assert "0.209" in row and "0.0008" in row  # one row, both models
    assert "<th>zoo:coloring-AE_R</th>" in page and "only here" not in page  # only numbers both models have


def test_a_step_that_only_prints_shows_what_it_printed(tmp_path):
    from interp_rand.figures.demo_index import PRINTED, demo_index

    (tmp_path / "zoo").mkdir()
    (tmp_path / "zoo" / PRINTED).write_text("name  task\nsort  sort <b>\n")
    page = demo_index(tmp_path, [{"folder": "zoo", "what": "the zoo", "command": "interp-rand zoo list",
                                  "seconds": 0.1}])
    assert "<pre class='printed'>name  task\nsort  sort &lt;b&gt;</pre>" in page
