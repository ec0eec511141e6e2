"""tests/built_once.py: under pytest-xdist the first worker builds a fixture and the others load
the same value; without xdist each call builds."""

from dataclasses import dataclass
from pathlib import Path

import torch

from built_once import built_once
from interp_rand import HookedTransformer, make_task


@dataclass
class _Factory:  # what built_once reads of pytest's tmp_path_factory
    base: Path

    def getbasetemp(self) -> Path:
        return self.base

    def mktemp(self, name: str) -> Path:
        folder = self.base / name
        folder.mkdir(parents=True)
        return folder


def test_the_second_worker_loads_what_the_first_built(tmp_path, monkeypatch):
    task = make_task("addition", n_digits=2)
    built = []

    def build(folder):
        built.append(folder)
        (folder / "written").write_text("by the builder")
        return HookedTransformer(task.model_config(d_model=16, n_heads=2), seed=len(built)).eval(), {"n": len(built)}

    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    first, info = built_once(_Factory(tmp_path / "gw0"), "model", build)
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    second, again = built_once(_Factory(tmp_path / "gw1"), "model", build)
    assert len(built) == 1 and info == again == {"n": 1}
    assert (built[0] / "written").read_text() == "by the builder" and built[0].parent == tmp_path
    inputs = task.sample(8, torch.Generator().manual_seed(0)).inputs
    assert second is not first and torch.equal(second(inputs), first(inputs))
    assert (tmp_path / "model.pt").exists() and not (tmp_path / "model.pt.partial").exists()


def test_without_xdist_each_call_builds(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    built = []
    factory = _Factory(tmp_path)
    values = [built_once(factory, f"value{i}", lambda folder: built.append(folder) or len(built)) for i in range(2)]
    assert values == [1, 2] and [p.name for p in built] == ["value0", "value1"]
