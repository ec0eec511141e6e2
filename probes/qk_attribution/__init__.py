"""Query/key attribution: why a head attends where it does.

For head ``(layer, head)`` and query position ``q``, the residual stream entering the block is a
sum of upstream nodes' writes, ``resid[p] = sum_i a_i[p]``:

- ``embed`` (``hook_embed``; absent behind an input MLP, which reads it), ``pos``
  (``hook_pos_embed``), ``seed`` (``hook_seed_embed`` when the seed is added to the stream or is
  its own token), ``input_mlp`` (``input_mlp.hook_post @ W_out + b_out``); when the seed is
  appended to the input MLP's input (recall), the input MLP's write is split exactly into
  ``input_mlp``, its value on the embedding alone (a zero seed projection: every seed bit 0),
  and ``seed``, what the seed adds to it through the input MLP;
- each earlier head ``aL.H`` (``hook_z @ W_O``), the earlier blocks' attention output biases
  together as ``b_O`` (only when non-zero) and each earlier MLP ``mL`` (``hook_mlp_out``);
  names as :class:`circuits.graph.nodes.Node` writes them.

The head's score is bilinear in that sum:
``score[q, k] = (sum_i Q_i(q) + Q_b) . (sum_j K_j(k) + K_b) / attn_scale`` with
``Q_i(q) = LN(a_i)[q] @ W_Q[h]`` and the bias node ``bias``:
``Q_b = ln1.b @ W_Q[h] + b_Q[h]`` (keys alike). LayerNorm is linearised in the standard way: each
part is centred and divided by the example's own, frozen LayerNorm scale at its position
(``(a_i - mean a_i) / scale * w``), so the parts sum to the LayerNorm's output exactly; without
LayerNorm the split needs no linearisation at all. Either way the query-node x key-node matrix
``C[i, j](q, k) = Q_i(q) . K_j(k) / attn_scale`` sums to the model's pre-softmax score; the
module checks that (:attr:`QKAttribution.max_error`) and refuses above ``1e-4``.

The parts are read from the cache here rather than from :mod:`circuits.graph.writers`: probes
may not import circuits (``tests/test_layers.py``), the attention report (``probes.report``)
shows the result, and the score needs *every* part of the residual stream, including the
positional embedding and the attention output biases, which are not writer nodes of
:class:`circuits.graph.model_graph.ModelGraph`.

**Patching check** (:func:`qk_patching_check`): a *contributor* is one upstream node on one
side (``q:pos``, ``k:a0.1``; the bias node is the head's own and not a contributor). They are
ranked by how much they move the scores across keys: for softmax attention (where a part
constant over keys changes nothing) the mean absolute deviation over a row's allowed keys of
that side's row of ``C`` summed over the other side; for linear attention (no softmax to cancel
a constant) its mean absolute value over allowed keys; averaged over examples. The top ``k``
contributors are removed from the head's query input (at ``q``) or key input (at every key):
the block's input is rebuilt without them (zero ablation, or their batch mean per position with
``ablation="mean"``), passed through the block's LayerNorm (recomputed, not frozen) and
``W_Q/W_K``, and written into ``hook_q``/``hook_k`` for this head only. The change of the head's
pattern at ``q`` is the total variation ``0.5 * sum_k |p - p'|`` (for linear attention, half the
L1 change of its unnormalised pattern), averaged over examples, against up to ``n_draws``
distinct random sets of ``k`` of the *other* contributors (every such set when there are fewer;
sets of all of them when fewer than ``k`` are left), as the sort study draws random *other*
heads. (Drawing from all contributors instead lets a random set hold a top one: on a head with
four contributors every 3-set does, and the comparison says nothing.)

**Verdict rule** (the project's ablation rule, :func:`interp_rand.verdicts.exceeds`, fixed before
the zoo models were run): *holds* when the top-``k`` change is at least ``margin`` (0.05) above
the mean random change and at least twice it; *fails* when it is less than ``margin`` above the
mean random change; *inconclusive* in between, and when the test cannot mean anything: no other contributor to draw, or a softmax query that sees
one key (its weight is 1 whatever the scores, so no removal can move the pattern).

    >>> attr = qk_attribution(model, batch, layer=1, head=2, query=7)   # zoo:sort's a1.2 at y1
    >>> attr.nodes            # ('embed', 'pos', 'a0.0', ..., 'a0.3', 'm0', 'b_O', 'bias')
    >>> attr.mean.shape       # [keys, nodes, nodes]
    >>> qk_patching_check(model, batch, attr).verdict                    # 'holds'
"""

from __future__ import annotations

from typing import Sequence

from torch import Tensor, nn

from interp_rand.tasks.base import Batch
from probes.qk_attribution.attribution import QKAttribution, qk_attribution
from probes.qk_attribution.parts import PART_KINDS, TOLERANCE, Contributor, Part, residual_parts
from probes.qk_attribution.patching_check import MARGIN, QKPatchCheck, pattern_change, qk_patching_check
from probes.qk_attribution.seed_bits import SeedBitReads, reads_by_seed_bit


def explain_heads(model: nn.Module, batch: Batch | Tensor, heads: Sequence[tuple[int, int, int]], *,
                  seed: int = 0) -> tuple[tuple[QKAttribution, QKPatchCheck], ...]:
    """:func:`qk_attribution` and its :func:`qk_patching_check` for each ``(layer, head, query)``
    of ``heads`` on ``batch``: what the attention report and the circuit drawing show."""
    out = []
    for layer, head, query in heads:
        attr = qk_attribution(model, batch, layer, head, query)
        out.append((attr, qk_patching_check(model, batch, attr, seed=seed)))
    return tuple(out)


__all__ = ["MARGIN", "PART_KINDS", "Contributor", "Part", "QKAttribution", "QKPatchCheck", "SeedBitReads", "TOLERANCE", "explain_heads",
           "pattern_change", "qk_attribution", "qk_patching_check", "reads_by_seed_bit", "residual_parts"]
