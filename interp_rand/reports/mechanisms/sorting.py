"""How ``zoo:sort`` sorts: a rank readout from the histogram of the list, not a next-larger search.

The model (2 layers, 4 heads, MLPs) writes ``y_k``, the ``k``-th smallest input, at output
position ``q = L + k`` (``SEP`` for ``k = 0``, else the token ``y_{k-1}``). It does not look for
"the smallest input larger than the current token": at ``q`` the four layer-0 heads *together*
read the list as an order-free histogram (in the middle ranks each head's output at ``q``
linearly holds nearly all ten value counts; one head's output moves at most half of the answers:
the minimum rests mostly on a0.1 + a0.2, the maximum on a0.0 + a0.1, the middle ranks on all
four), MLP 0 at ``q`` turns histogram and
position into the ``k``-th order statistic ``min{v : #{x_i <= v} > k}`` (patching MLP 0's output
at ``q`` from another list makes the model write *that* list's ``y_k``), and layer 1 only writes
it out (its four heads are redundant: resampling all of them costs at most 6 points at any
position). Duplicates need no special case: the count rule repeats ``v`` as long as
``#{x_i <= v} > k``.

The layer-0 heads at ``q`` also attend to the written tokens ``y_0 .. y_{k-1}`` (on the task
they are the ``k`` smallest inputs, a function of the list, so they are part of the same
histogram site); attention knockouts show them a redundant second source. The current token is
not the cue the answer is searched from. Hence the predictions, each on inputs built from the
whole enumeration of the ``10^5`` lists (found while exploring, see the notes):

- **a written token lowered** (the token at an output position replaced by a smaller value, so
  the current token there and a written token for every later position are wrong): the count
  readout does not depend on it, so the model still writes ``sorted(x)`` at every position; a
  next-larger search would restart from the lowered token;
- **the current token raised above the answer**: on the task the current token never exceeds
  the answer; above it, it conflicts with the count readout and the model is predicted to be
  unreliable there (it does not follow the token upward as a next-larger search would: it
  writes ``y_k`` or repeats ``y_{k-1}``);
- **duplicates** are read by the same count and the model sorts them as well as distinct
  values.

:func:`mechanism` builds the hypothesis; :data:`PSEUDOCODE` states it.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
from torch import Tensor

from circuits.graph.nodes import Node
from circuits.mechanisms import Mechanism, Prediction, Site, Variable

RUN = "zoo:sort"

PSEUDOCODE = """\
for k in 0..L-1, at output position q = L + k (SEP for k = 0, else the token y_{k-1}):
    h_k = histogram of x_0 .. x_{L-1}       # a0.0 + a0.1 + a0.2 + a0.3 @ q, jointly (order-free)
    c_k = the current token (k >= 1)         # embed @ q: read by m0 and the readout as a cue
    y_k = min{v : #{i : x_i <= v} > k}       # m0 @ q: the k-th order statistic from h_k (and c_k, q)
    write y_k                                # readout: m1 @ q (a1.0-a1.3 @ q redundant) reads y_k, h_k, c_k
the answer is not searched up from c_k: with c_k edited the model keeps y_k (decisive edits);
duplicates repeat while the count allows
"""


# ---------------------------------------------------------------------- the algorithm's steps
def lists_of(batch: Any, length: int) -> Tensor:
    return batch.inputs[:, :length]


def multiset_code(batch: Any, length: int, vocab: int = 10) -> Tensor:
    """``[batch]`` the list's multiset as one integer (its sorted values as base-``vocab``
    digits): equal codes <=> equal histograms."""
    if vocab ** length >= 2 ** 62:
        raise ValueError(f"a multiset of {length} values over {vocab} does not fit one int64 code")
    values = lists_of(batch, length).sort(1).values
    weights = vocab ** torch.arange(length - 1, -1, -1)
    return (values * weights).sum(1)


def order_statistic(code: Tensor, k: int, length: int, vocab: int = 10) -> Tensor:
    """``min{v : #{x_i <= v} > k}``, read from a multiset code: its ``k``-th sorted value."""
    return (code // vocab ** (length - 1 - k)) % vocab


def sample_with_partners(task: Any, n: int, generator: torch.Generator) -> Any:
    """``n`` lists, drawn in pairs: a uniform list and a random reordering of it, so that every
    multiset has a partner that agrees on the histogram (what scrubbing resamples from)."""
    half = (n + 1) // 2
    lists = torch.randint(0, task.vocab, (half, task.length), generator=generator)
    shuffled = lists.gather(1, torch.rand(half, task.length, generator=generator).argsort(1))
    return task.build(torch.cat([lists, shuffled])[:n])


# ---------------------------------------------------------------------- prediction inputs
ENUMERATE_MAX = 10 ** 6  # larger input spaces are sampled, not enumerated
SAMPLED_LISTS = 100_000  # how many, when the caller names no number


def every_list(task: Any, generator: torch.Generator, n_lists: int | None = None) -> Tensor:
    """``[V^L, L]`` the whole input space, or ``n_lists`` rows of it drawn without replacement
    (a quick look for tests); a space larger than ``ENUMERATE_MAX`` lists is sampled (uniform,
    with replacement): ``n_lists`` of them, or ``SAMPLED_LISTS``."""
    size = task.vocab ** task.length
    if size > ENUMERATE_MAX:
        return torch.randint(0, task.vocab, (n_lists or SAMPLED_LISTS, task.length), generator=generator)
    lists = torch.tensor(list(itertools.product(range(task.vocab), repeat=task.length)))
    if n_lists is None or n_lists >= len(lists):
        return lists
    return lists[torch.randperm(len(lists), generator=generator)[:n_lists]]


def with_written_token(task: Any, generator: torch.Generator, direction: str, n_lists: int | None = None) -> Any:
    """Every list, with one written token changed (targets stay ``sorted(x)``).

    ``direction="lowered"``: the token at a random output position ``q = L + k`` (``k >= 1``),
    i.e. the current token ``y_{k-1}`` (a written token for every later position), replaced by a
    uniform value below it, where one exists.
    ``direction="raised"``: the token at a random output position ``q = L + k`` (``k >= 1``),
    i.e. the current token ``y_{k-1}``, replaced by a uniform value above ``y_k``, where one
    exists. ``metadata["changed"]``: the output index ``k`` whose query token was changed
    (``-1``: the row has no such value and is unchanged).
    """
    lists = every_list(task, generator, n_lists)
    batch = task.build(lists)
    L, V = task.length, task.vocab
    n = len(lists)
    answer = lists.sort(1).values
    k = torch.randint(1, L, (n,), generator=generator)  # the query position q = L + k is changed
    rows = torch.arange(n)
    old = answer[rows, k - 1]
    u = torch.rand(n, generator=generator)
    if direction == "lowered":
        ok = old > 0
        new = (u * old).long()  # uniform in 0 .. old - 1
    elif direction == "raised":
        floor = answer[rows, k]
        ok = floor < V - 1
        new = floor + 1 + (u * (V - 1 - floor)).long()  # uniform in floor + 1 .. V - 1
    else:
        raise ValueError(f"direction={direction!r} is not allowed; choose 'lowered' or 'raised'")
    inputs = batch.inputs.clone()
    inputs[rows[ok], (L + k)[ok]] = new[ok].clamp(max=V - 1)
    changed = torch.where(ok, k, torch.full_like(k, -1))
    metadata = {**batch.metadata, "changed": changed}
    return type(batch)(inputs=inputs, targets=batch.targets, loss_mask=batch.loss_mask,
                       answer_positions=batch.answer_positions, metadata=metadata)


def all_lists(task: Any, generator: torch.Generator, n_lists: int | None = None) -> Any:
    return task.build(every_list(task, generator, n_lists))


# ---------------------------------------------------------------------- the hypothesis
def by_output(variables: tuple[Variable, ...]) -> list[Variable]:
    """The variables output by output, each output's in the order given (the order the checks
    draw their pairs in, kept from when they were written out per output)."""
    families = list(dict.fromkeys(v.family for v in variables))
    return sorted(variables, key=lambda v: (v.instance, families.index(v.family)))


def mechanism(task: Any, n_lists: int | None = None, n_heads: int = 4) -> Mechanism:
    """The rank-readout hypothesis for a sort task of ``task.length`` values over ``task.vocab``
    (``n_heads`` heads a layer); its predictions look at every list (``n_lists``: that many of
    them, drawn at random). The current token at each output position after the first is a
    mapped input (``embed @ q``) that MLP 0 reads with the histogram: on the task it is
    ``y_{k-1}``, a function of the list, so the order statistic does not change with it, but a
    treeified scrub must know that MLP 0 reads it (resampling it from an unrelated list
    breaks the model; measured by the decisive experiments, the model still follows the count
    over the token on most edits)."""
    L, V = task.length, task.vocab
    if n_lists is not None and n_lists < 1:
        raise ValueError(f"n_lists={n_lists} must be a positive number of lists, or None for all of them")
    heads0 = lambda q: Site.of(*(Node("head", 0, h, position=q) for h in range(n_heads)))  # noqa: E731
    hist = Variable.each("hist", range(L), lambda b, k: multiset_code(b, L, V), site=lambda k: heads0(L + k),
                         description=lambda k: f"the list's histogram, read at output position {L + k} by the layer-0 heads")
    current = Variable.each("current", range(1, L), lambda b, k: b.inputs[:, L + k],
                            site=lambda k: Site.of(Node("embed", position=L + k)),
                            description=lambda k: f"the current token at {L + k} (y_{k - 1} on the task), read by "
                                                  "MLP 0 as a cue")
    y = Variable.each("y", range(L), lambda b, k, **p: order_statistic(p[f"hist_{k}"], k, L, V),
                      parents=lambda k: (f"hist_{k}",) + ((f"current_{k}",) if k else ()),
                      site=lambda k: Site.of(Node("mlp", 0, position=L + k)),
                      description=lambda k: f"order statistic k={k}: min{{v : #{{x <= v}} > {k}}}, computed by "
                                            f"MLP 0 at {L + k}")
    variables = by_output(hist + current + y)
    readout = tuple(node for q in range(L, 2 * L)
                    for node in [Node("mlp", 1, position=q)] + [Node("head", 1, h, position=q) for h in range(n_heads)])

    def changed(b: Any, v: Any) -> Tensor:
        return b.metadata["changed"] >= 0

    predictions = (
        Prediction("a written token lowered",
                   "the count readout does not depend on the written tokens' values: the model writes sorted(x) "
                   "everywhere; a next-larger search would restart from the lowered token",
                   changed, "succeed", 0.9, lambda t, g: with_written_token(t, g, "lowered", n_lists)),
        Prediction("the current token raised above the answer",
                   "on the task the current token never exceeds the answer; above it, it conflicts with the "
                   "count readout and the model is unreliable (it does not follow it upward as a next-larger search would)",
                   changed, "fail", 0.9, lambda t, g: with_written_token(t, g, "raised", n_lists)),
        Prediction("lists with duplicates",
                   "duplicates are read by the same count (repeat v while #{x <= v} > k): no special case",
                   lambda b, v: b.metadata["n_distinct"] < L, "succeed", 0.99, lambda t, g: all_lists(t, g, n_lists)),
    )
    return Mechanism(
        "sort-rank-readout", "sort", tuple(variables),
        answer=lambda b, **v: torch.stack([v[f"y_{k}"] for k in range(L)], 1),
        # the readout reads the whole residual at q: every variable held there is its parent
        answer_parents=tuple(v.name for v in variables), outputs=tuple(range(L)), readout=readout,
        predictions=predictions, pseudocode=PSEUDOCODE, sample=sample_with_partners)


def applies(model: Any, task: Any) -> str | None:
    """Why the rank readout, as stated here (layer 0's heads read, MLP 0 computes, layer 1
    writes), cannot be checked on ``model`` (``None``: it can): it needs two or more blocks of
    four heads with MLPs and the sort task's layout, any length and vocabulary."""
    if getattr(task, "name", None) != "sort":
        return f"it is stated for the sort task, not {getattr(task, 'name', task)!r}"
    if model.cfg.n_layers < 2 or getattr(model.cfg, "attn_only", False):
        return f"it names MLP 0 and a second block; the model has {model.cfg.n_layers} block(s)" + (
            " without MLPs" if getattr(model.cfg, "attn_only", False) else "")
    if model.cfg.n_heads != 4:
        return f"it names 4 heads a layer; the model has {model.cfg.n_heads}"
    return None


# ---------------------------------------------------------------------- the rivals
def _successor(b: Any, L: int, k: int, c: Tensor) -> Tensor:
    """The next element after the current token ``c`` at output ``k``: ``c`` again when the
    list holds more copies of ``c`` than are written, else the smallest input above ``c``
    (``c`` when there is none)."""
    x = lists_of(b, L)
    written = b.inputs[:, L + 1: L + k]  # y_0 .. y_{k-2}; the current token c is y_{k-1}
    copies = (x == c[:, None]).sum(1)
    used = (written == c[:, None]).sum(1) + 1
    above = torch.where(x > c[:, None], x, torch.full_like(x, 10 ** 6)).min(1).values
    return torch.where((copies > used) | (above == 10 ** 6), c, above)


def _rival(task: Any, name: str, y_site: Any, pseudocode: str, n_heads: int) -> Mechanism:
    """A next-larger search with the flagship's inputs (the list read by the layer-0 heads at
    ``q``, the current token at ``embed @ q``) and ``y_k`` held at ``y_site(q)``."""
    L, V = task.length, task.vocab
    lists = Variable.each("list", range(L), lambda b, k: multiset_code(b, L, V),
                          site=lambda k: Site.of(*(Node("head", 0, h, position=L + k) for h in range(n_heads))),
                          description=lambda k: f"the list's values, read at {L + k} by the layer-0 heads")
    current = Variable.each("current", range(1, L), lambda b, k: b.inputs[:, L + k],
                            site=lambda k: Site.of(Node("embed", position=L + k)),
                            description=lambda k: f"the current token y_{k - 1} at {L + k}: the cue")
    first = Variable("y_0", lambda b, **p: lists_of(b, L).min(1).values, ("list_0",), site=y_site(L),
                     description="the minimum", family="y", instance=0)
    rest = Variable.each("y", range(1, L), lambda b, k, **p: _successor(b, L, k, p[f"current_{k}"]),
                         parents=lambda k: (f"list_{k}", f"current_{k}"), site=lambda k: y_site(L + k),
                         description="the next element after the current token")
    variables = by_output((*lists, *current, first, *rest))
    return Mechanism(name, "sort", tuple(variables),
                     answer=lambda b, **v: torch.stack([v[f"y_{k}"] for k in range(L)], 1),
                     answer_parents=tuple(v.name for v in variables), outputs=tuple(range(L)),
                     readout=tuple(Node("mlp", 1, position=q) for q in range(L, 2 * L)), pseudocode=pseudocode)


def next_larger_mechanism(task: Any, n_heads: int = 4) -> Mechanism:
    """The next-larger search, with the flagship's sites: at ``q = L + k`` MLP 0 takes the
    current token ``c = y_{k-1}`` (``embed @ q``) as the cue and the list (the layer-0 heads)
    and writes ``c`` again when copies remain, else the smallest input above ``c``. On the task
    it agrees with the rank readout everywhere (the current token is a function of the list);
    it differs when the current token is not ``y_{k-1}``."""
    return _rival(task, "sort-next-larger", lambda q: Site.of(Node("mlp", 0, position=q)),
                  "y_k = c_k if copies of c_k remain, else min{x_i > c_k}   # m0 @ q reads c_k (embed @ q)\n"
                  "                                                            # and the list (a0.* @ q)", n_heads)


def copy_heads_mechanism(task: Any, n_heads: int = 4) -> Mechanism:
    """The per-head reading of the sort case study: the layer-1 heads at ``q`` (its
    "next-element heads") attend to the next element after the current token and copy it; MLP 1
    writes it out. MLP 0 plays no part."""
    return _rival(task, "sort-copy-heads", lambda q: Site.of(*(Node("head", 1, h, position=q) for h in range(n_heads))),
                  "y_k = the input the layer-1 heads at q attend to: the next element after c_k  # a1.* @ q\n"
                  "write y_k                                                                  # m1 @ q", n_heads)


def rivals(task: Any, n_heads: int = 4) -> dict[str, Mechanism]:
    """The real rivals of the rank readout: the next-larger search and the copy heads."""
    return {m.name: m for m in (next_larger_mechanism(task, n_heads), copy_heads_mechanism(task, n_heads))}


__all__ = ["PSEUDOCODE", "RUN", "applies", "copy_heads_mechanism", "mechanism", "multiset_code", "next_larger_mechanism",
           "order_statistic", "rivals",
           "sample_with_partners", "with_written_token"]
