"""A real report written through interp_rand.output (issue 26): a disk that fills up while a
circuit is written leaves the earlier circuit.json, circuit.html and card.json byte for byte
(the issue: card.json truncated to 8,192 bytes, a new circuit.json beside the old circuit.html);
a circuit written without a card removes the old card with it."""

from __future__ import annotations

import errno

import pytest
from circuit_models import make_model, token_pairs
from faults import fill_disk_after

from circuits import discover
from interp_rand.figures.html_page import PLOTLY_FILE
from interp_rand.output import replace_files, write_json, write_text
from interp_rand.output.lock import LOCK_FILE
from interp_rand.output.write_error import RunWriteError
from interp_rand.reports.circuit import CircuitReport, card_files


@pytest.fixture(scope="module")
def report():
    model = make_model()
    clean, corrupted = token_pairs()
    circuit = discover(model, clean, corrupted, metric="logprob", method="eap").circuit(top_k=12)
    return CircuitReport(circuit, None, {"method": "eap", "recovered": float("nan")}, "tiny circuit", None,
                         [f"p{i}" for i in range(6)])


def files(folder) -> dict[str, bytes]:
    """The report's files (not the lock, nor the folder's shared plotly.min.js its pages load)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name not in (LOCK_FILE, PLOTLY_FILE)}


def earlier_results(report, out):
    report.write(out)
    with replace_files(out, card_files()) as stage:  # and a claim card beside it, as `circuit` writes
        write_json(stage / "card.json", {"verdict": "supported", "curve": list(range(4000))})
        write_text(stage / "card.html", "<html>the earlier card</html>")
    return files(out)


def test_a_full_disk_while_a_circuit_is_written_leaves_the_earlier_results_byte_for_byte(report, tmp_path,
                                                                                          monkeypatch):
    out = tmp_path / "circuit"
    before = earlier_results(report, out)
    assert set(before) == set(CircuitReport.FILES) and len(before["card.json"]) > 8192
    for budget in (8192, 40_000):  # the disk fills inside the first file, then inside the HTML
        fill_disk_after(monkeypatch, budget)
        with pytest.raises(RunWriteError) as err:
            report.write(out)
        monkeypatch.undo()
        assert err.value.errno == errno.ENOSPC and "No space left on device" in str(err.value)
        assert files(out) == before, budget
        assert not [p.name for p in out.iterdir() if p.name.startswith(".tmp-")]


def test_a_circuit_without_a_card_removes_the_old_card_and_the_json_is_strict(report, tmp_path):
    out = tmp_path / "circuit"
    earlier_results(report, out)
    report.write(out)  # this report has no card
    assert sorted(files(out)) == sorted(set(CircuitReport.FILES) - set(card_files()))
    assert b"NaN" not in (out / "faithfulness.json").read_bytes()
    assert b'"non_finite_as_null": [\n    "recovered"\n  ]' in (out / "faithfulness.json").read_bytes()
