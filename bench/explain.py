"""``explain`` timed on the zoo and on models the toolkit did not train, on one thread.

    python bench/explain.py [--out FILE] [--steps 1500] [--models DIR] [--zoo-only]

Models:

* ``zoo:sort`` and ``zoo:addition`` (trained by the toolkit's recipes);
* three GPT-2 models trained here in plain PyTorch with Hugging Face ``transformers``
  (``GPT2LMHeadModel``, 2 layers, 4 heads, d_model 64; D-RASP's benchmark models are GPT-2s of
  this kind), saved with ``save_pretrained`` into ``--models`` and read back through the ``hf``
  importer (offline, its logits checked against TransformerLens's ``boot_transformers``
  bridge): **sort** (the toolkit's layout, so ``import hf --task sort`` makes a run folder of
  it), **reverse** and **copy** (tasks the toolkit does not ship, given as a ``TaskSpec``);
* the running-max ``TransformerBridge`` of ``examples/bring_your_own_model.py``;
* D-RASP's own benchmark models (``--drasp DIR``: a local copy of ``share/saved_models`` of their
  public repository, ``lacoco-lab/decompiling_transformers``; nothing is downloaded), read with
  :func:`interp_rand.importers.drasp.read_drasp` in their layout ``BOS x SEP y``; each row says
  whether their pipeline decompiled that model (their ``good_models.json`` names a pruning run
  for it, chosen as the sparsest reaching match accuracy 0.9);
* the zoo's seeded models (``zoo:recall-Aq_R``, ``zoo:coloring-Aq_R`` and their ERM twins):
  programs that read the seed or not, and the seed experiment (with the flagships' declared
  programs, as the CLI runs it).

For each: seconds, the chosen candidate, its verdict, its match and the deciding experiment.
``seconds`` is explain as the CLI runs it, compositions included (the chosen candidate restated
through named intermediate steps, each step's site searched); for a model whose chosen candidate
has compositions (``zoo:addition``'s digit sum) the row also has ``seconds_no_compose``
(``--no-compose``: the candidates only) and ``seconds_compose`` (what the compositions add). The
issue's goal: at most 5 minutes on one core for a 2-layer model, compositions included.
A model whose folder exists in ``--models`` is reused, not retrained; ``--zoo-only`` times the
zoo's models only.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from circuits.explain import explain  # noqa: E402
from interp_rand.importers import import_model  # noqa: E402
from interp_rand.importers.hf_gpt2 import read_gpt2  # noqa: E402
from interp_rand.tasks import Batch, TaskSpec  # noqa: E402
from interp_rand.training.checkpoint import load_checkpoint  # noqa: E402

L, V = 5, 10
SEP = V


def sequence_task(name: str, answer) -> TaskSpec:
    """``x_1 .. x_L SEP y_1 .. y_L`` with ``y = answer(x)``, the sort task's layout."""

    def sample(n: int, generator: torch.Generator) -> Batch:
        x = torch.randint(0, V, (n, L), generator=generator)
        y = answer(x)
        seq = torch.cat([x, torch.full((n, 1), SEP), y], 1)
        inputs, targets = seq[:, :-1], seq[:, 1:]
        mask = torch.zeros_like(targets, dtype=torch.bool)
        mask[:, L:] = True
        return Batch(inputs, targets, mask, torch.arange(L, 2 * L))

    return TaskSpec(name, sample, [f"x{i}" for i in range(L)] + ["sep"] + [f"y{i}" for i in range(L - 1)])


TASKS = {"sort": lambda x: x.sort(1).values, "reverse": lambda x: x.flip(1), "copy": lambda x: x}


def train_gpt2(task: TaskSpec, folder: Path, steps: int, seed: int = 0) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=V + 1, n_positions=2 * L, n_embd=64, n_layer=2, n_head=4, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=SEP, eos_token_id=SEP)
    model = GPT2LMHeadModel(cfg)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        batch = task.sample(256, generator)
        logits = model(batch.inputs).logits
        loss = torch.nn.functional.cross_entropy(logits[batch.loss_mask], batch.targets[batch.loss_mask])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    model.eval().save_pretrained(folder)


def row(name: str, model, task, seconds_load: float) -> dict:
    start = time.perf_counter()
    found = explain(model, task)
    seconds = time.perf_counter() - start
    deciding = found.comparison.headline() if found.comparison is not None else "the only candidate"
    out = {"model": name, "chosen": found.chosen, "stated": found.stated, "verdict": found.verdict,
           "match": next((s.match for s in found.candidates if s.candidate.name == found.chosen), None),
           "kept": [s.candidate.name for s in found.candidates if s.kept], "decided": deciding,
           "composed": found.composed, "seconds": round(seconds, 1), "load_seconds": round(seconds_load, 1),
           "headline": found.headline()}
    if found.composed:  # the same search without the compositions, beside it
        start = time.perf_counter()
        flat = explain(model, task, compose=False)
        out["seconds_no_compose"] = round(time.perf_counter() - start, 1)
        out["seconds_compose"] = round(seconds - out["seconds_no_compose"], 1)
        if flat.chosen != found.chosen:
            raise AssertionError(f"{name}: explain chose {flat.chosen} without compositions, {found.chosen} with them")
    return out


# D-RASP's benchmark models read here, and whether their pipeline decompiled each (a chosen
# pruning run in their repository's good_models.json: the sparsest with match accuracy >= 0.9)
DRASP_MODELS = {"sort-@1l1h256d3lr01drop": True, "unique_copy-@2l1h64d3lr01drop": True,
                "unique_reverse-@2l1h64d3lr01drop": True, "count-@1l4h256d4lr01drop": True,
                "count-#1l4h256d3lr01drop": False, "majority-@1l4h256d3lr01drop": True,
                "bin_majority-@1l1h16d3lr01drop": True}

SEEDED = ("zoo:recall-Aq_R", "zoo:recall-AE_R", "zoo:coloring-Aq_R", "zoo:coloring-AE_R")


def seeded_row(run: str) -> dict:
    """A seeded zoo model explained as the CLI does (its flagship's declared programs scored too)."""
    from interp_rand.reports.explain import explain_report

    start = time.perf_counter()
    found = explain_report(run).explanation
    chosen = found.score(found.chosen)
    return {"model": run, "chosen": found.chosen, "verdict": found.verdict, "match": chosen.match,
            "uses_seed": found.uses_seed, "model_moves": found.model_moves, "follows": chosen.follows,
            "control": chosen.control, "seconds": round(time.perf_counter() - start, 1), "headline": found.headline()}


def drasp_rows(folder: Path) -> list[dict]:
    """explain on each of :data:`DRASP_MODELS` found under ``folder``, beside D-RASP's own outcome."""
    from interp_rand.importers.drasp import read_drasp

    out = []
    for name, decompiled in DRASP_MODELS.items():
        if not (folder / name / "config.json").is_file():
            print(f"{name}: not under {folder}, skipped", flush=True)
            continue
        start = time.perf_counter()
        model, task = read_drasp(folder / name)
        out.append({**row(f"D-RASP {name}", model, task, time.perf_counter() - start),
                    "drasp_decompiled": decompiled})
        print(json.dumps(out[-1]), flush=True)
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--steps", type=int, default=1500, help="training steps of each GPT-2 (default: 1500)")
    parser.add_argument("--models", type=Path, default=Path("out/bench-explain-models"))
    parser.add_argument("--drasp", type=Path, default=None, metavar="DIR",
                        help="a local copy of D-RASP's share/saved_models: time explain on their benchmark models")
    parser.add_argument("--zoo-only", action="store_true",
                        help="time the zoo's models only (sort, addition, the seeded ones)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for run in ("zoo:sort", "zoo:addition"):
        start = time.perf_counter()
        ckpt = load_checkpoint(run)
        rows.append(row(run, ckpt.model().eval(), ckpt.spec.make_task(), time.perf_counter() - start))
        print(json.dumps(rows[-1]), flush=True)
    for run in SEEDED:
        rows.append(seeded_row(run))
        print(json.dumps(rows[-1]), flush=True)
    if args.drasp is not None:
        rows += drasp_rows(args.drasp)
    result = {"machine": platform.platform(), "threads": 1, "rows": rows}
    if args.zoo_only:
        if args.out:
            args.out.write_text(json.dumps(result, indent=1))
        return result
    for name, answer in TASKS.items():
        task = sequence_task(name, answer)
        folder = args.models / f"gpt2-{name}"
        if not (folder / "config.json").is_file():
            start = time.perf_counter()
            train_gpt2(task, folder, args.steps)
            print(f"trained gpt2-{name} in {time.perf_counter() - start:.0f} s", flush=True)
        start = time.perf_counter()
        if name == "sort":  # the toolkit's own layout: a run folder like its own
            run = args.models / "run-gpt2-sort"
            if not (run / "checkpoint.json").is_file() and not run.exists():
                import_model("hf", str(folder), run, task="sort", task_config=json.dumps({"length": L, "vocab": V}))
            ckpt = load_checkpoint(run)
            model, spec = ckpt.model().eval(), ckpt.spec.make_task()
        else:
            model, spec = read_gpt2(folder), task
        rows.append(row(f"gpt2-{name} (transformers)", model, spec, time.perf_counter() - start))
        print(json.dumps(rows[-1]), flush=True)
    from examples.bring_your_own_model import build

    start = time.perf_counter()
    model, task = build()
    rows.append(row("running-max TransformerBridge (examples/bring_your_own_model.py)", model, task,
                    time.perf_counter() - start))
    print(json.dumps(rows[-1]), flush=True)
    result = {"machine": platform.platform(), "threads": 1, "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
