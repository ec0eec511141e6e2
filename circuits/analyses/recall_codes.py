"""Recall as a memory of key codes: what each pair writes into the query's answer, per seed.

The recall model (``zoo:recall-*``) has no normalisation and no MLP after its input MLP, and its
attention is linear (score ``q·k``, no softmax), so the answer logits at the query position ``N``
split exactly into one term per (layer, position):

    logits = W_U e_N + b_U + sum_l sum_j P_l[N, j] (v_l(j) W_O^l W_U)

``P_l[N, j] = q_l(N) · k_l(j)`` is the *overlap* of the query's code with pair ``j``'s key code
in layer ``l`` (the pattern the hook records), and ``v_l(j) W_O^l W_U`` the pair's value read
out by the model's own unembedding. Signed by the target bits (``+`` pushes a bit toward its
right value), the terms of the queried pair are the **signal**, those of every other pair its
**crosstalk**, and the rest (the query's own token, the bias) the remainder: for each answer
bit, ``margin = signal + crosstalk + rest`` exactly (:func:`decompose` checks it).

:func:`code_study` reads this on ``n_inputs`` inputs under ``n_seeds`` seeds (the same inputs
under every seed) and measures, for the hypothesis that recall fails by interference between key
codes and that a randomized model's seed redraws which codes collide:

- (a) **interference predicts failure**: recall is predicted to fail where the crosstalk
  overturns the signal on some bit (``signal + crosstalk < 0``, the rest left out): accuracy
  beside the trivial rate (always predicting the majority outcome), and the AUC of the score
  ``max_b -(signal_b + crosstalk_b)`` beside the AUC of the signal alone;
- (b) **the randomized signature**: the correlation of an input's overlap pattern (every
  other pair's overlap, both layers) between two seeds; the share of colliding (input, pair)
  cases (that pair's crosstalk alone overturns the signal) that collide under *every* seed;
  the share of inputs that fail under every seed;
- (c) **the seed switch**: for a failing (input, seed) with a colliding pair, switching to a
  seed under which that pair does not collide (chosen by the codes, not by the outcome) rescues
  recall how often, against switching to a seed under which the pair still collides (and, for
  the base rate, to a random other seed); then the same rescue as interventions on the codes
  (:func:`code_transplant`): only the colliding pair's key code, only a control pair's, only
  the query's code, all codes, or only the values, taken from the separating seed into the
  failing run;
- (d) **the adversaries**: one who knows the seed picks an input that fails under it (the
  share of seeds for which one of the inputs fails); an oblivious one picks the input whose
  failure is likeliest over seeds (the worst input's failure rate across seeds).

Every number is a share or an AUC in [0, 1]; nothing divides by a quantity that can vanish
(a share over an empty set is NaN and says so).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from interp_rand.model.hook_names import hook_name
from interp_rand.display import Displayed, bars_svg


# The algorithm, as the claims test it: each step names its components and the claim that
# checks it (code_claims); the numbers are on the page beside it, not here.
PSEUDOCODE = """\
for each token t (pair j, then the query N):  x_t = input_mlp(token_t, seed)  # the seed enters every code
for layer l in 0, 1 (a{l}.0: linear attention, score q.k, no softmax):
    q = hook_q @ N;  k_j = hook_k @ j;  v_j = hook_v @ j                     # the codes and the values
    out_N += sum_j (q . k_j) * v_j W_O                                      # overlap times the pair's value
bits = sign(W_U out_N + rest) = sign(signal[queried] + sum_{j != queried} crosstalk_j + rest)  # exact
recall fails  <=>  the crosstalk overturns the signal                     # (a) AUC beside the signal alone
the seed redraws q and every k_j: which pairs collide moves with it       # (b) collisions under every seed
    another seed's q and k alone rescue a failing recall, its v alone not  # (c) code transplants
    so no input fails under every seed: a random hash against an oblivious adversary  # (b), (d)"""


@dataclass
class Decomposition:
    """The query's answer per bit, split exactly (module docstring); every term signed by the
    target bit. ``signal`` ``[n, V]``, ``crosstalk`` ``[n, N, V]`` (0 at the queried pair),
    ``rest`` ``[n, V]``, ``margin`` ``[n, V]`` (the model's signed logits), ``overlaps``
    ``[n, layers, N]`` (``P_l[N, j]``, summed over heads), ``queried`` ``[n]`` positions."""

    signal: Tensor
    crosstalk: Tensor
    rest: Tensor
    margin: Tensor
    overlaps: Tensor
    queried: Tensor

    @property
    def fails(self) -> Tensor:
        """``[n]`` bool: some answer bit is wrong."""
        return (self.margin < 0).any(1)

    @property
    def overturned(self) -> Tensor:
        """``[n]`` bool: the crosstalk overturns the signal on some bit."""
        return (self.signal + self.crosstalk.sum(1) < 0).any(1)

    @property
    def colliding(self) -> Tensor:
        """``[n, N]`` bool: that pair's crosstalk alone overturns the signal on some bit."""
        return (self.crosstalk + self.signal[:, None] < 0).any(2)


def check_architecture(model: Any) -> None:
    cfg = model.cfg
    problems = [f"{name}={getattr(cfg, name)!r} (needs {need!r})" for name, need in
                (("attention", "linear"), ("normalization_type", None), ("attn_only", True))
                if getattr(cfg, name, need) != need]
    if problems:
        raise ValueError("the key-code decomposition needs linear attention, no normalisation and no MLPs (the "
                         "recall model's architecture): " + "; ".join(problems))


@torch.no_grad()
def decompose(model: Any, batch: Any) -> Decomposition:
    """The exact split of the answer logits at the query (module docstring), checked to sum to
    the model's logits."""
    check_architecture(model)
    N = int(batch.answer_positions[0])
    L = model.cfg.n_layers
    names = [hook_name(l, h) for l in range(L) for h in ("attn.hook_pattern", "attn.hook_v")]
    names.append(hook_name(0, "hook_resid_pre"))
    logits, cache = model.run_with_cache(batch.inputs, **batch.model_kwargs(), names_filter=lambda name: name in names)
    W_U = model.unembed.W_U  # [d, V]
    sign = 2 * batch.targets[:, N] - 1  # [n, V]
    patterns = [cache[hook_name(l, "attn.hook_pattern")][:, :, N, :] for l in range(L)]  # [n, h, pos] each
    terms = []
    for l, pattern in enumerate(patterns):
        v = cache[hook_name(l, "attn.hook_v")]  # [n, pos, h, e]
        out = torch.einsum("nhp,nphe,hed->npd", pattern, v, model.blocks[l].attn.W_O)  # [n, pos, d]
        terms.append(out @ W_U)  # [n, pos, V]
    per_position = torch.stack(terms, 1)  # [n, L, pos, V]
    base = cache[hook_name(0, "hook_resid_pre")][:, N] @ W_U + model.unembed.b_U
    total = base + per_position.sum((1, 2))
    if (total - logits[:, N]).abs().max() > 1e-3 * max(1.0, float(logits[:, N].abs().max())):
        raise ValueError("the per-position terms do not add up to the logits: the model is not the linear, "
                         "unnormalised architecture the decomposition assumes")
    queried = batch.metadata["query_index"].long()
    rows = torch.arange(len(queried))
    pairs = per_position[:, :, :N].sum(1) * sign[:, None]  # [n, N, V] both layers, signed
    signal = pairs[rows, queried]
    crosstalk = pairs.clone()
    crosstalk[rows, queried] = 0
    rest = (base + per_position[:, :, N].sum(1)) * sign
    overlaps = torch.stack([pattern[..., :N].sum(1) for pattern in patterns], 1)
    return Decomposition(signal, crosstalk, rest, logits[:, N] * sign, overlaps, queried)


def auc(score: Tensor, positive: Tensor) -> float:
    """The probability that a random positive scores above a random negative (ties half): NaN
    when either class is empty."""
    pos, neg = score[positive].float(), score[~positive].float()
    if not len(pos) or not len(neg):
        return float("nan")
    ranks = torch.cat([pos, neg]).argsort().argsort().float()  # ties broken by order; averaged below
    combined = torch.cat([pos, neg])
    # average ranks over ties
    _, inverse, counts = torch.unique(combined, return_inverse=True, return_counts=True)
    sums = torch.zeros(len(counts)).index_add_(0, inverse, ranks)
    ranks = (sums / counts)[inverse]
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) - 1) / 2) / (len(pos) * len(neg)))


def _share(mask: Tensor, of: Tensor | None = None) -> float:
    if of is not None:
        mask = mask[of]
    return float(mask.float().mean()) if mask.numel() else float("nan")


@dataclass(repr=False)
class CodeStudy(Displayed):
    """What :func:`code_study` measured (module docstring), on ``n_inputs`` x ``n_seeds``."""

    n_inputs: int
    n_seeds: int
    failure_rate: float
    interference_accuracy: float
    trivial_accuracy: float
    interference_auc: float
    signal_auc: float
    rest_share: float
    overlap_correlation: float
    collide_every_seed: float
    fail_every_seed: float
    fail_some_seed: float
    rescue_switch: float
    rescue_random: float
    n_switch: int
    knowing_adversary: float
    oblivious_adversary: float
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def lines(self) -> list[str]:
        return [
            f"recall fails on {self.failure_rate:.3f} of {self.n_inputs} inputs x {self.n_seeds} seeds",
            f"(a) 'fails where the crosstalk overturns the signal': accuracy {self.interference_accuracy:.3f} "
            f"(trivial {self.trivial_accuracy:.3f}); AUC {self.interference_auc:.3f} (signal alone "
            f"{self.signal_auc:.3f}); the rest (query token, bias) is {self.rest_share:.3f} of the margin's size",
            f"(b) overlap patterns of two seeds correlate {self.overlap_correlation:.3f}; colliding (input, pair) "
            f"cases that collide under every seed {self.collide_every_seed:.3f}; inputs failing under every seed "
            f"{self.fail_every_seed:.3f} (under some seed {self.fail_some_seed:.3f})",
            f"(c) switching a failing recall to a seed that separates its colliding pair rescues "
            f"{self.rescue_switch:.3f}, to a seed where no pair collides {self.details['rescue_no_collision']:.3f}, "
            f"to a random other seed {self.rescue_random:.3f}, to one where the pair still collides "
            f"{self.details['rescue_still_colliding']:.3f} ({self.n_switch} cases)",
            "(c) taken from the separating seed into the failing run alone, these rescue: "
            + ", ".join(f"{k.replace('_', ' ')} {v:.3f}" for k, v in self.details["transplant"].items() if k != "n_cases")
            + f" ({self.details['transplant']['n_cases']} cases); from a random other seed into any failing recall: "
            + ", ".join(f"{k.replace('_', ' ')} {v:.3f}" for k, v in self.details["transplant_any"].items() if k != "n_cases")
            + f" ({self.details['transplant_any']['n_cases']} cases)",
            f"(d) an adversary who knows the seed finds a failing input for {self.knowing_adversary:.3f} of seeds; "
            f"an oblivious one's best input fails on {self.oblivious_adversary:.3f} of seeds",
        ]

    def small_figure(self) -> str | None:
        """(a), (c) and (d) as bars, each share beside its reference within the model (the
        claims against the ERM twin are :func:`code_claims`')."""
        d = self.details
        moved = d.get("transplant_any", {})
        return bars_svg([
            ("(a) failure predicted by (AUC)", ""), ("the crosstalk", self.interference_auc),
            ("the signal alone", self.signal_auc),
            ("(c) a failing recall switched to a seed where", ""), ("its colliding pair separates", self.rescue_switch),
            ("the pair still collides", d.get("rescue_still_colliding")), ("any other seed", self.rescue_random),
            ("(c) moved alone from another seed", ""), ("the query and key codes", moved.get("all_codes")),
            ("the values", moved.get("values")),
            ("(d) adversaries", ""), ("knowing the seed: seeds it beats", self.knowing_adversary),
            ("oblivious: seeds its input fails", self.oblivious_adversary),
        ], lo=0.0, hi=1.0, max_rows=13, caption="(a) AUC; (c) share of failing recalls rescued; (d) share of seeds")


# (c)'s code transplants: which of the separating seed's codes, moved alone into the failing
# run, rescue it. Each arm: (label, [(hook, whose)]): ``whose`` is "pair" (the colliding pair's
# position), "control" (a pair neither queried nor colliding), "query" (the query's position)
# or "pairs" (every pair's position); the hook fires in every layer.
TRANSPLANTS = (
    ("pair_key", [("hook_k", "pair")]),
    ("control_key", [("hook_k", "control")]),
    ("query_code", [("hook_q", "query")]),
    ("all_codes", [("hook_q", "query"), ("hook_k", "pairs")]),
    ("values", [("hook_v", "pairs")]),
)
# the arms that need no colliding pair: run on every failing recall with a random other seed
SEED_ARMS = TRANSPLANTS[2:]
ANY_FAILURE_CASES = 600  # failing (input, seed) cases drawn for them


@torch.no_grad()
def code_transplant(model: Any, task: Any, base: Any, seeds: Tensor, cases: list[tuple[int, int, int, int, int]],
                    arms: tuple[tuple[str, list[tuple[str, str]]], ...] = TRANSPLANTS) -> dict[str, Any]:
    """(c) as interventions on the codes. Each case ``(s, i, j, t, c)``: input ``i`` fails
    under seed ``s``, pair ``j`` collides there, seed ``t`` separates it, pair ``c`` (neither
    queried nor colliding under ``s``) is the control. Input ``i`` runs under seed ``s`` with one
    :data:`TRANSPLANTS` arm's activations taken from its run under seed ``t`` (everything else
    keeps seed ``s``), and the share of cases recalled is the arm's rescue; ``whole_seed`` is
    the run under ``t`` itself. The hypothesis (the seed acts through the overlaps of the
    codes) predicts: the colliding pair's key rescues beyond a control pair's, and all codes
    (the query's and every key) beyond the values (the rival: the seed acts on what a pair
    stores, not on where it is stored).

    ``arms`` (default :data:`TRANSPLANTS`) names the arms run.

    Returns ``{arm: share recalled, "whole_seed": share, "n_cases": n}`` (NaN without cases)."""
    labels = [label for label, _ in arms] + ["whole_seed"]
    if not cases:
        return {**{label: float("nan") for label in labels}, "n_cases": 0}
    s, i, j, t, c = (torch.tensor(col) for col in zip(*cases))
    rows = base[i]
    n = len(rows)
    donor = task.with_seeds(rows, seeds[t].clone())
    failing = task.with_seeds(rows, seeds[s].clone())
    N = int(failing.answer_positions[0])
    L = model.cfg.n_layers
    hooks = {hook for _, arm in arms for hook, _ in arm}
    names = [hook_name(l, f"attn.{hook}") for l in range(L) for hook in hooks]
    donor_logits, cache = model.run_with_cache(donor.inputs, **donor.model_kwargs(),
                                               names_filter=lambda name: name in names)
    arange = torch.arange(n)
    positions = {"pair": j, "control": c, "query": torch.full((n,), N)}

    def recalled(logits: Tensor, batch: Any) -> float:
        return float(((logits[:, N] > 0).float() == batch.targets[:, N]).all(1).float().mean())

    def patcher(whose: str):
        def patch(x: Tensor, hook: Any) -> Tensor:
            x = x.clone()
            if whose == "pairs":
                x[:, :N] = cache[hook.name][:, :N]
            else:
                x[arange, positions[whose]] = cache[hook.name][arange, positions[whose]]
            return x
        return patch

    out: dict[str, Any] = {}
    for label, arm in arms:
        fwd_hooks = [(hook_name(l, f"attn.{hook}"), patcher(whose)) for hook, whose in arm for l in range(L)]
        out[label] = recalled(model.run_with_hooks(failing.inputs, **failing.model_kwargs(), fwd_hooks=fwd_hooks),
                              failing)
    out["whole_seed"] = recalled(donor_logits, donor)
    out["n_cases"] = n
    return out


def _mean_pairwise_correlation(patterns: Tensor, generator: torch.Generator, n_pairs: int = 256) -> float:
    """Mean Pearson correlation of one input's pattern (``[S, n, F]``) between two random seeds."""
    S, n, _ = patterns.shape
    if S < 2:
        return float("nan")
    a = torch.randint(0, S, (n_pairs,), generator=generator)
    b = (a + torch.randint(1, S, (n_pairs,), generator=generator)) % S
    i = torch.randint(0, n, (n_pairs,), generator=generator)
    x, y = patterns[a, i], patterns[b, i]
    x, y = x - x.mean(1, keepdim=True), y - y.mean(1, keepdim=True)
    denom = x.norm(dim=1) * y.norm(dim=1)
    ok = denom > 0
    return float(((x * y).sum(1)[ok] / denom[ok]).mean()) if bool(ok.any()) else float("nan")


@torch.no_grad()
def code_study(model: Any, task: Any, *, n_inputs: int = 300, n_seeds: int = 64, seed: int = 0) -> CodeStudy:
    """The same ``n_inputs`` recall inputs under ``n_seeds`` seeds (drawn from every seed),
    decomposed (module docstring)."""
    generator = torch.Generator().manual_seed(seed)
    base = task.sample(n_inputs, generator)
    every = task.all_seeds()
    seeds = every[torch.randperm(len(every), generator=generator)[:n_seeds]]
    parts = [decompose(model, task.with_seeds(base, seeds[s].expand(n_inputs, -1).clone())) for s in range(len(seeds))]
    S = len(parts)
    fails = torch.stack([p.fails for p in parts])            # [S, n]
    over = torch.stack([p.overturned for p in parts])        # [S, n]
    collide = torch.stack([p.colliding for p in parts])      # [S, n, N]
    score = torch.stack([(-(p.signal + p.crosstalk.sum(1))).max(1).values for p in parts])
    signal_score = torch.stack([(-p.signal).max(1).values for p in parts])
    rest = torch.stack([p.rest.abs().mean() / p.margin.abs().mean().clamp(min=1e-12) for p in parts])
    overlaps = torch.stack([p.overlaps.flatten(1) for p in parts])  # [S, n, L*N]
    p_fail = float(fails.float().mean())
    # (b) collisions that hold under every seed, among the (input, pair) cases colliding under some seed
    some = collide.any(0)
    every_seed = collide.all(0)
    # (c) a failing (seed, input) with a colliding pair j: a seed where j does not collide, by the codes
    rescued, random_rescued, all_clear, still, transplants = [], [], [], [], []
    queried = base.metadata["query_index"].long()

    controls = torch.Generator().manual_seed(seed + 1)  # the controls' draws leave (a)-(d)'s as they were

    def pick(options: Tensor, draws: torch.Generator = generator) -> int:
        return int(options[torch.randint(len(options), (1,), generator=draws)])

    for s, i in fails.nonzero().tolist():
        pairs = collide[s, i].nonzero()[:, 0]
        if not len(pairs):
            continue
        j = pick(pairs)
        separating = (~collide[:, i, j]).nonzero()[:, 0]
        others = torch.tensor([t for t in range(S) if t != s])
        if not len(separating) or not len(others):
            continue
        t = pick(separating)
        rescued.append(not bool(fails[t, i]))
        u = pick(others)
        random_rescued.append(not bool(fails[u, i]))
        # the matched control: another seed under which the same pair still collides
        colliding_too = torch.tensor([v for v in collide[:, i, j].nonzero()[:, 0].tolist() if v != s])
        if len(colliding_too):
            still.append(not bool(fails[pick(colliding_too, controls), i]))
        quiet = torch.tensor([p for p in range(collide.shape[2]) if p != int(queried[i]) and not bool(collide[s, i, p])])
        if len(quiet):
            transplants.append((s, i, j, t, pick(quiet, controls)))
        clear = (~collide[:, i].any(1)).nonzero()[:, 0]  # seeds where no pair collides
        if len(clear):
            all_clear.append(not bool(fails[int(clear[torch.randint(len(clear), (1,), generator=generator)]), i]))
    transplant = code_transplant(model, task, base, seeds, transplants)
    # every failing recall (not only those one pair overturns) with a random other seed
    failing = fails.nonzero()
    failing = failing[torch.randperm(len(failing), generator=controls)[:ANY_FAILURE_CASES]].tolist() if S > 1 else []
    anywhere = [(s, i, 0, (s + 1 + int(torch.randint(S - 1, (1,), generator=controls))) % S, 0) for s, i in failing]
    transplant_any = code_transplant(model, task, base, seeds, anywhere, arms=SEED_ARMS)
    rescue = sum(rescued) / len(rescued) if rescued else float("nan")
    rescue_random = sum(random_rescued) / len(random_rescued) if random_rescued else float("nan")
    flat_fail, flat_over = fails.flatten(), over.flatten()
    trivial = max(p_fail, 1 - p_fail)
    return CodeStudy(
        n_inputs=n_inputs, n_seeds=S, failure_rate=p_fail,
        interference_accuracy=_share(flat_over == flat_fail), trivial_accuracy=trivial,
        interference_auc=auc(score.flatten(), flat_fail), signal_auc=auc(signal_score.flatten(), flat_fail),
        rest_share=float(rest.mean()),
        overlap_correlation=_mean_pairwise_correlation(overlaps, generator),
        collide_every_seed=_share(every_seed, some), fail_every_seed=_share(fails.all(0)),
        fail_some_seed=_share(fails.any(0)), rescue_switch=rescue, rescue_random=rescue_random,
        n_switch=len(rescued), knowing_adversary=_share(fails.any(1)),
        oblivious_adversary=float(fails.float().mean(0).max()) if fails.numel() else float("nan"),
        details={"seed": seed, "colliding_cases": int(some.sum()), "seeds": seeds.tolist(),
                 "rescue_no_collision": sum(all_clear) / len(all_clear) if all_clear else float("nan"),
                 "n_no_collision": len(all_clear),
                 "rescue_still_colliding": sum(still) / len(still) if still else float("nan"),
                 "n_still_colliding": len(still),
                 "transplant": transplant, "transplant_any": transplant_any},
    )


def code_claims(randomized: dict[str, Any], erm: dict[str, Any], name: str, twin: str) -> list[Any]:
    """The randomized-algorithm hypothesis as claims on two :class:`CodeStudy` dicts (a
    randomized model and its ERM twin), each by the one verdict rule
    (:func:`interp_rand.verdicts.exceeds`, its default margin 0.05 and ratio 2): (a) crosstalk
    predicts failure beyond the signal alone (AUC above chance, 0.5); (b) the seed redraws the
    codes (1 - the overlap correlation between seeds) beyond the twin's; the twin's collisions
    hold under every seed beyond the randomized model's; inputs fail under every seed for the
    twin beyond the randomized model; (c) among failing recalls one pair overturns, switching to
    a seed that separates that pair rescues beyond switching to one under which it still
    collides, and the pair's key code alone from the separating seed rescues beyond a control
    pair's, each by more than the same difference for the twin (its failures are borderline:
    anything flips some of them, so the difference within one model is no evidence alone);
    across every failing recall, another seed's codes alone (the query's and every key's)
    rescue beyond its values alone (:func:`code_transplant`); (d) the oblivious adversary's
    best input is still recalled (over seeds) beyond the twin's. (Until 2026-12-06 (c) was the
    separating switch against a random switch within the model: the base rate of success, not
    the separation.)"""
    from interp_rand.verdicts import exceeds

    r, e = randomized, erm
    return [
        exceeds(f"(a) {name}: recall fails where the crosstalk overturns the signal (AUC above chance)",
                r["interference_auc"] - 0.5, r["signal_auc"] - 0.5, control_label="the signal alone (AUC above chance)"),
        exceeds(f"(b) {name}'s seed redraws the key codes (1 - overlap correlation between seeds)",
                1 - r["overlap_correlation"], 1 - e["overlap_correlation"], control_label=twin),
        exceeds(f"(b) {twin}'s collisions hold under every seed, {name}'s do not (share of colliding cases)",
                e["collide_every_seed"], r["collide_every_seed"], control_label=name),
        exceeds(f"(b) inputs fail under every seed for {twin}, not for {name} (share of inputs)",
                e["fail_every_seed"], r["fail_every_seed"], control_label=name),
        exceeds(f"(c) {name}: a seed that separates the colliding pair rescues recall beyond one under which it "
                f"still collides, by more than for {twin} (difference of shares rescued)",
                r["rescue_switch"] - r["details"]["rescue_still_colliding"],
                e["rescue_switch"] - e["details"]["rescue_still_colliding"], control_label=twin),
        exceeds(f"(c) {name}: the colliding pair's key code alone, from the separating seed, rescues recall beyond "
                f"another pair's key code, by more than for {twin} (difference of shares rescued)",
                r["details"]["transplant"]["pair_key"] - r["details"]["transplant"]["control_key"],
                e["details"]["transplant"]["pair_key"] - e["details"]["transplant"]["control_key"], control_label=twin),
        exceeds(f"(c) {name}'s seed acts through the codes: another seed's query and key codes alone rescue its "
                "failing recalls (share rescued)", r["details"]["transplant_any"]["all_codes"],
                r["details"]["transplant_any"]["values"], control_label="that seed's values alone"),
        exceeds(f"(d) {name} recalls the oblivious adversary's best input on some seeds (its success over seeds)",
                1 - r["oblivious_adversary"], 1 - e["oblivious_adversary"], control_label=twin),
    ]


__all__ = ["PSEUDOCODE", "CodeStudy", "Decomposition", "auc", "check_architecture", "code_claims", "code_study", "decompose"]
