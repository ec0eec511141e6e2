"""The mechanism card: every check of a :class:`~circuits.mechanisms.Mechanism` in one call,
each with a verdict by a rule stated here, before any number is looked at.

    >>> card = check_mechanism(model, task, mechanism, n=2000, seed=0)
    >>> print("\\n".join(card.lines()))

The rules (constants below; a claim's line prints its rule) are those of
:mod:`interp_rand.verdicts` (:func:`~interp_rand.verdicts.exceeds`,
:func:`~interp_rand.verdicts.reaches`, :func:`~interp_rand.verdicts.meets`) with these numbers:

- **agreement**: the algorithm's answer equals the model's argmax at every output on at least
  ``AGREEMENT_MIN`` of the examples, and beats by ``MARGIN`` the control: the algorithm run on
  a shuffled batch, scored against the same model answers (chance agreement); a
  ``per_output`` mechanism counts (example, output) entries instead of whole examples.
- **scrubbing** (treeified by default, :mod:`circuits.mechanisms.scrubbing`): the share of the
  model's own-answer log-probability recovered under causal scrubbing is at least ``SCRUB_MIN``
  and beats the mean share of same-size random location sets by ``MARGIN``; an
  empty-hypothesis gap below the floor makes it inconclusive;
- **whole outputs under scrubbing**: the scrubbed model's answer equals the clean model's at
  every output on at least ``SCRUB_AGREEMENT_MIN`` of the examples (an absolute share, so that
  one wrong output in nine is not diluted by the eight kept), against the same share for the
  random location sets (``MARGIN`` below).
- **interchange**, per mapped variable: IIA at least ``IIA_MIN`` with every control at most
  ``CONTROL_MAX`` holds; IIA below ``IIA_MIN`` on a model that answers at least
  ``BASE_ACCURACY_MIN`` of the inputs fails, whatever its controls; a control above
  ``CONTROL_MAX`` on an IIA that reaches ``IIA_MIN`` (the test cannot tell the variable from its
  control), fewer than ``MIN_PAIRS`` pairs, or a model that does not solve the task is
  inconclusive (:func:`probes.interchange.interchange_claim`, the rule of
  :func:`probes.interchange.verdict` too).
- **predictions**: accuracy where the prediction applies at least (``succeed``) or at most
  (``fail``) its threshold; fewer than ``MIN_WHERE`` such inputs is inconclusive.

Every share is in the metric's own units beside its absolute values (clean, empty and scrubbed
log-probabilities), and no control divides by a quantity that can vanish.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

from interp_rand.verdicts import Claim, exceeds, meets, reaches, summary_line
from circuits.graph.model_graph import ModelGraph
from circuits.mechanisms.hypothesis import Mechanism
from circuits.mechanisms.interchange import VariableCheck, check_variable
from circuits.mechanisms.patching import answer_logits, check_sites, mechanism_hooks, record, writer_locations
from circuits.mechanisms.predictions import PredictionCheck, check_prediction, correct_rows
from circuits.mechanisms.scrubbing import Scrubbing, scrub
from probes.controls import random_init_like
from probes.interchange import BASE_ACCURACY_MIN, CONTROL_MAX, IIA_HOLDS, DASConfig, interchange_claim
from interp_rand.display import Displayed

AGREEMENT_MIN = 0.9
SCRUB_MIN = 0.9
SCRUB_AGREEMENT_MIN = 0.9
IIA_MIN = IIA_HOLDS  # the interchange rule's numbers are probes.interchange's
MARGIN = 0.1
MIN_PAIRS = 20
MIN_WHERE = 10


def agreement_claim(agreement: float, chance: float) -> Claim:
    """:func:`~interp_rand.verdicts.exceeds` with the floor ``AGREEMENT_MIN`` against chance."""
    return exceeds("the algorithm's answer is the model's answer", agreement, chance,
                   control_label="the algorithm on shuffled inputs", margin=MARGIN, ratio=1.0, floor=AGREEMENT_MIN,
                   unavailable="no examples")


def scrubbing_claim(s: Scrubbing) -> Claim:
    """:func:`~interp_rand.verdicts.reaches` ``SCRUB_MIN``, random location sets ``MARGIN`` below."""
    share, control = s.share["logprob"], s.control_mean("logprob")
    label = f"{len(s.random_locations['logprob'])} random sets of {s.n_locations} locations"
    claim = reaches("causal scrubbing keeps the model's behaviour", share, target=SCRUB_MIN,
                    controls={label: control}, margin=MARGIN, value_name="share",
                    unavailable="resampling everything leaves the model's answers as they were (no gap to recover)")
    return Claim(claim.text, claim.value, claim.control, label, claim.verdict)


def whole_output_claim(s: Scrubbing) -> Claim:
    """:func:`~interp_rand.verdicts.reaches` ``SCRUB_AGREEMENT_MIN`` on the scrubbed model's
    whole-output agreement with its clean answers; random location sets' agreement ``MARGIN``
    below (absolute agreements: an empty gap cannot make them undefined)."""
    label = f"{len(s.random_locations['logprob'])} random sets of {s.n_locations} locations"
    random = s.details.get("random_locations_agreement", [])
    control = sum(random) / len(random) if random else float("nan")
    claim = reaches("under causal scrubbing every output keeps the model's answer", s.scrubbed["accuracy"],
                    target=SCRUB_AGREEMENT_MIN, controls={label: control}, margin=MARGIN,
                    value_name="whole-output agreement")
    return Claim(claim.text, claim.value, claim.control, label, claim.verdict)


def variable_claim(c: VariableCheck) -> Claim:
    """The interchange rule (:func:`probes.interchange.interchange_claim`), with ``MIN_PAIRS``."""
    return interchange_claim(f"{c.variable} is held at {c.site}", c.iia, c.controls, c.base_accuracy,
                             too_few=f"only {c.n_pairs} pairs change the answer" if c.n_pairs < MIN_PAIRS else "")


def prediction_claim(p: PredictionCheck) -> Claim:
    """:func:`~interp_rand.verdicts.meets`: accuracy where predicted at least (``succeed``) or at
    most (``fail``) the prediction's threshold, on at least ``MIN_WHERE`` inputs."""
    succeed = p.expect == "succeed"
    return meets(f"prediction: the model {'succeeds' if succeed else 'fails'} on {p.name}", p.accuracy_where,
                 p.threshold, side="at least" if succeed else "at most", control=p.accuracy_elsewhere,
                 control_label=f"accuracy elsewhere ({p.n_elsewhere} inputs)", value_name="accuracy where predicted",
                 condition=f"at least {MIN_WHERE} inputs",
                 too_few=f"only {p.n_where} inputs where it applies" if p.n_where < MIN_WHERE else "")


@dataclass(repr=False)
class MechanismCard(Displayed):
    """Everything :func:`check_mechanism` measured, and the claims with their verdicts."""

    mechanism: str
    task: str
    pseudocode: str
    variables: list[str]
    agreement: float
    chance_agreement: float
    base_accuracy: float
    scrubbing: Scrubbing
    interchange: list[VariableCheck]
    predictions: list[PredictionCheck]
    claims: list[Claim]
    seconds: float
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        """``holds`` when every claim holds; ``fails`` when any fails; else ``inconclusive``."""
        outcomes = {c.verdict.outcome for c in self.claims}
        return "fails" if "fails" in outcomes else ("holds" if outcomes == {"holds"} else "inconclusive")

    def failing(self) -> list[Claim]:
        return [c for c in self.claims if not c.verdict.holds]

    def headline(self) -> str:
        """One line: the verdict, and the first claim that does not hold."""
        bad = self.failing()
        head = f"mechanism {self.mechanism} ({self.task}): {self.verdict.upper()}"
        return head if not bad else f"{head} — {bad[0].line().removeprefix('claim: ')}"

    def lines(self) -> list[str]:
        s = self.scrubbing
        out = [self.headline(), "algorithm:"] + ["    " + line for line in self.pseudocode.strip("\n").splitlines()]
        out += ["variables:"] + ["    " + v for v in self.variables]
        out += [c.line() for c in self.claims]
        out += [f"{c.variable} at {c.site}: never changes the algorithm's answer here, so interchange does not test it"
                for c in self.interchange if c.n_pairs == 0]
        out.append(f"scrubbing (own-answer log-prob): clean {s.clean['logprob']:.3f}, everything resampled "
                   f"{s.empty['logprob']:.3f}, scrubbed {s.scrubbed['logprob']:.3f}; accuracy clean "
                   f"{s.clean['accuracy']:.3f} / resampled {s.empty['accuracy']:.3f} / scrubbed {s.scrubbed['accuracy']:.3f}"
                   f"; sites kept clean recover {s.sites_kept['logprob']:.3f}; scrubbed agreement per output "
                   + " ".join(f"{x:.3f}" for x in s.scrubbed.get("per_output", [])))
        out.append(f"model accuracy {self.base_accuracy:.3f} on {s.n_examples} inputs; {self.seconds:.1f} s")
        out.append(summary_line(self.claims))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "task": self.task, "verdict": self.verdict, "headline": self.headline(),
                "pseudocode": self.pseudocode, "variables": self.variables, "agreement": self.agreement,
                "chance_agreement": self.chance_agreement, "base_accuracy": self.base_accuracy,
                "scrubbing": self.scrubbing.to_dict(), "interchange": [c.to_dict() for c in self.interchange],
                "predictions": [p.to_dict() for p in self.predictions],
                "claims": [c.to_dict() for c in self.claims], "seconds": self.seconds, "config": self.config}


@torch.no_grad()
def _agreement(model: Any, mech: Mechanism, batch: Any, values: dict, generator: torch.Generator) -> tuple[float, float]:
    predicted = answer_logits(model, batch, torch.tensor(mech.outputs)).argmax(-1)
    answer = mech.answer_of(batch, values)
    perm = torch.randperm(len(batch), generator=generator)
    shuffled = mech.answer_of(batch[perm], {k: v[perm] for k, v in values.items()})
    if mech.per_output:
        return float((predicted == answer).float().mean()), float((predicted == shuffled).float().mean())
    return (float((predicted == answer).all(1).float().mean()), float((predicted == shuffled).all(1).float().mean()))


def prepare(model: Any, task: Any, mech: Mechanism, n: int, seed: int, batch: Any = None
            ) -> tuple[torch.Generator, Any, ModelGraph, dict]:
    """The start every check of a mechanism shares: the seeded generator, the evaluation batch
    (``n`` inputs from ``mech.sample``, or the given ``batch``), the sites checked against the
    model, its graph and the variables' values; the model in eval mode."""
    generator = torch.Generator().manual_seed(seed)
    model.eval()
    if batch is None:
        batch = mech.sample_batch(task, n, generator)
    check_sites(model, [v.site for v in mech.mapped])
    return generator, batch, ModelGraph.of(model, batch.inputs.shape[1]), mech.values(batch)


def check_mechanism(model: Any, task: Any, mech: Mechanism, *, n: int = 2000, seed: int = 0, n_pairs: int = 500,
                    n_random: int = 10, das: DASConfig = DASConfig(), random_model: Any = None,
                    batch: Any = None, recursive: bool = True) -> MechanismCard:
    """Interchange per mapped variable, causal scrubbing of the whole hypothesis and every
    prediction, on ``n`` inputs from ``mech.sample`` (or the given ``batch``), with verdicts;
    ``recursive``: treeified scrubbing (default) or one level."""
    start = time.perf_counter()
    generator, batch, graph, values = prepare(model, task, mech, n, seed, batch)
    random_model = random_init_like(model, seed=seed + 1) if random_model is None else random_model
    hooks = mechanism_hooks(graph, [v.site for v in mech.mapped])
    acts, random_acts = record(model, batch, hooks), record(random_model, batch, hooks)
    base_accuracy = float(correct_rows(model, mech, batch).float().mean())
    train = torch.rand(len(batch), generator=generator) < 0.5
    checks, bases = [], {}
    for v in mech.mapped:
        check, basis = check_variable(model, random_model, graph, mech, v, batch, values, acts, random_acts, train,
                                      base_accuracy, n_pairs, generator, das)
        checks.append(check)
        bases[v.name] = basis
    scrubbing = scrub(model, graph, mech, batch, values, acts, generator, bases, n_random, recursive)
    predictions = [check_prediction(model, task, mech, p, batch, generator) for p in mech.predictions]
    agreement, chance = _agreement(model, mech, batch, values, generator)
    # a variable whose value never changes the algorithm's answer (a cue the answer does not
    # depend on, e.g. the current token of a sort) has no interchange pair: interchange cannot
    # test it, so it makes no claim here (scrubbing and the decisive experiments test it)
    claims = ([agreement_claim(agreement, chance), scrubbing_claim(scrubbing), whole_output_claim(scrubbing)]
              + [variable_claim(c) for c in checks if c.n_pairs > 0]
              + [prediction_claim(p) for p in predictions])
    return MechanismCard(mech.name, mech.task, mech.pseudocode, mech.describe(), agreement, chance, base_accuracy,
                         scrubbing, checks, predictions, claims, time.perf_counter() - start,
                         {"n": len(batch), "seed": seed, "n_pairs": n_pairs, "n_random": n_random, "recursive": recursive,
                          "n_locations": len(writer_locations(graph))})


__all__ = ["AGREEMENT_MIN", "BASE_ACCURACY_MIN", "CONTROL_MAX", "IIA_MIN", "MARGIN", "MIN_PAIRS", "MIN_WHERE",
           "SCRUB_AGREEMENT_MIN", "SCRUB_MIN", "MechanismCard", "prepare", "agreement_claim", "check_mechanism", "prediction_claim",
           "scrubbing_claim", "variable_claim", "whole_output_claim"]
