"""Bring your own model: a TransformerLens TransformerBridge trained in plain PyTorch on a task the
toolkit does not ship (the running maximum of a token sequence), then its circuit with the claim
card, the attention report and a probe with its control, through a small TaskSpec.

    python examples/bring_your_own_model.py --out /tmp/byom        # about 10 s of CPU, imports included
    interp-rand circuit --model examples.bring_your_own_model:build --out /tmp/byom-circuit

docs/bring-your-own-model.md shows this file's first half.
"""

import argparse
import json
import time
from pathlib import Path

import torch
from transformer_lens import TransformerBridgeConfig
from transformer_lens.model_bridge import TransformerBridge

from interp_rand.model.bridge import from_bridge
from interp_rand.reports.circuit import circuit_report
from interp_rand.tasks import Batch, PairBatch, TaskSpec
from probes import ProbeConfig, probe_task
from probes.report import ReportConfig, build_report
from probes.variables import VariableLabels, rows_to_groups

L, V = 6, 10  # sequence length, vocabulary: the answer at position t is max(x_0 .. x_t)


def batch_of(x):
    return Batch(x, x.cummax(1).values, torch.ones_like(x, dtype=torch.bool), torch.arange(L))


def sample(n, generator):
    return batch_of(torch.randint(0, V, (n, L), generator=generator))


def corrupt(batch, generator):  # lower the first maximum: the running max changes from there on
    x, where = batch.inputs.clone(), batch.inputs.argmax(1)
    x[torch.arange(len(x)), where] = 0
    return PairBatch(batch, batch_of(x), where)


def maximum(task, batch, model):  # a probe variable: the sequence's maximum; control: random labels per sequence
    return VariableLabels(batch.targets[:, -1:], V, ("max",), rows_to_groups(batch.inputs)[:, None])


TASK = TaskSpec("running-max", sample, [f"x{i}" for i in range(L)], corrupt, variables={"max": maximum})


def train_bridge(steps=100, seed=0, **shape):  # shape: other TransformerBridgeConfig sizes (n_layers=1 ...)
    sizes = {"d_model": 64, "d_head": 16, "n_heads": 4, "n_layers": 2, **shape}
    cfg = TransformerBridgeConfig(**sizes, n_ctx=L, d_vocab=V, d_vocab_out=V, act_fn="gelu", normalization_type="LN",
                                  positional_embedding_type="standard", seed=seed)
    bridge = TransformerBridge.boot_native(cfg)
    optimiser, generator = torch.optim.AdamW(bridge.parameters(), lr=3e-3), torch.Generator().manual_seed(seed)
    for _ in range(steps):
        batch = sample(128, generator)
        loss = torch.nn.functional.cross_entropy(bridge(batch.inputs).flatten(0, 1), batch.targets.flatten())
        optimiser.zero_grad(), loss.backward(), optimiser.step()
    return bridge.eval()


def build():  # for `interp-rand circuit|report|eval --model examples.bring_your_own_model:build`
    return from_bridge(train_bridge()), TASK


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=100, help="training steps of the bridge (batch 128)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    began = time.perf_counter()
    model = from_bridge(train_bridge(args.steps))
    trained = time.perf_counter() - began
    test = sample(512, torch.Generator().manual_seed(1))
    with torch.no_grad():
        accuracy = float((model(test.inputs).argmax(-1) == test.targets).float().mean())
    circuit = circuit_report(model=model, task=TASK, method="eap-ig", n=32, card_random=5, n_resamples=2)
    circuit.write(args.out / "circuit")
    report = build_report(model, TASK, ReportConfig(n_examples=128, n_probe_examples=512))
    from probes.report_html import write_report

    write_report(report, args.out / "report.html")
    probe = probe_task(model, TASK, sample(512, torch.Generator().manual_seed(2)), ProbeConfig(causal=False))[0]
    summary = {
        "accuracy": accuracy,
        "circuit": circuit.key_numbers(),
        "card": circuit.card_lines(),
        "head_roles": {role: report.roles.best(role) for role in report.roles.scores},
        "probe": [{k: row[k] for k in ("instance", "hook", "position", "accuracy", "control", "random_accuracy")}
                  for row in probe.rows()],
    }
    summary["seconds"] = {"training": round(trained, 1), "total": round(time.perf_counter() - began, 1)}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    print(json.dumps(summary, indent=2, default=str))
    return summary


if __name__ == "__main__":
    main()
