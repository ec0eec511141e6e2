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
    y_k = min{v : #{i : x_i <= v} > k}       # m0 @ q: the k-th order statistic from h_k and q
    write y_k                                # readout: m1 @ q (a1.0-a1.3 @ q redundant)
the current token y_{k-1} (embed @ q) is not searched from; duplicates repeat while the count allows
"""


# ---------------------------------------------------------------------- the algorithm's steps
def lists_of(batch: Any, length: int) -> Tensor:
    return batch.inputs[:, :length]


def multiset_code(batch: Any, length: int) -> Tensor:
    """``[batch]`` the list's multiset as one integer (its sorted values as base-``V`` digits,
    ``V <= 10`` here): equal codes <=> equal histograms."""
    values = lists_of(batch, length).sort(1).values
    weights = 10 ** torch.arange(length - 1, -1, -1)
    return (values * weights).sum(1)


def order_statistic(code: Tensor, k: int, length: int) -> Tensor:
    """``min{v : #{x_i <= v} > k}``, read from a multiset code: its ``k``-th sorted value."""
    return (code // 10 ** (length - 1 - k)) % 10


def sample_with_partners(task: Any, n: int, generator: torch.Generator) -> Any:
    """``n`` lists, drawn in pairs: a uniform list and a random reordering of it, so that every
    multiset has a partner that agrees on the histogram (what scrubbing resamples from)."""
    half = (n + 1) // 2
    lists = torch.randint(0, task.vocab, (half, task.length), generator=generator)
    shuffled = lists.gather(1, torch.rand(half, task.length, generator=generator).argsort(1))
    return task.build(torch.cat([lists, shuffled])[:n])


# ---------------------------------------------------------------------- prediction inputs
def every_list(task: Any, generator: torch.Generator, n_lists: int | None = None) -> Tensor:
    """``[V^L, L]`` the whole input space, or ``n_lists`` rows of it drawn without replacement
    (a quick look for tests)."""
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
def mechanism(task: Any, n_lists: int | None = None) -> Mechanism:
    """The rank-readout hypothesis for a sort task of ``task.length`` values (``vocab <= 10``);
    its predictions look at every list (``n_lists``: that many of them, drawn at random)."""
    L = task.length
    if n_lists is not None and n_lists < 1:
        raise ValueError(f"n_lists={n_lists} must be a positive number of lists, or None for all of them")
    if task.vocab > 10:
        raise ValueError(f"the sorting mechanism encodes multisets in base 10; vocab={task.vocab} must be <= 10")
    variables = []
    for k in range(L):
        q = L + k
        variables.append(Variable(
            f"hist_{k}", lambda b: multiset_code(b, L),
            site=Site.of(*(Node("head", 0, h, position=q) for h in range(4))),
            description=f"the list's histogram, read at output position {q} by the four layer-0 heads"))
        variables.append(Variable(
            f"y_{k}", lambda b, k=k, **p: order_statistic(p[f"hist_{k}"], k, L), parents=(f"hist_{k}",),
            site=Site.of(Node("mlp", 0, position=q)),
            description=f"order statistic k={k}: min{{v : #{{x <= v}} > {k}}}, computed by MLP 0 at {q}"))
    readout = tuple(node for q in range(L, 2 * L)
                    for node in [Node("mlp", 1, position=q)] + [Node("head", 1, h, position=q) for h in range(4)])

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
        answer_parents=tuple(f"y_{k}" for k in range(L)), outputs=tuple(range(L)), readout=readout,
        predictions=predictions, pseudocode=PSEUDOCODE, sample=sample_with_partners)


# ---------------------------------------------------------------------- the rival reading
def next_larger_mechanism(task: Any) -> Mechanism:
    """The reading the issue started from, as a mechanism to refute: at ``q = L + k`` the
    current token ``c = y_{k-1}`` (``embed @ q``) is the cue, and the answer is ``c`` again when
    the list holds more copies of ``c`` than are written, else the smallest input above ``c``.
    Its interchange on the current token fails on ``zoo:sort`` (the model keeps its answer)."""
    L = task.length

    def successor(b: Any, k: int, c: Tensor) -> Tensor:
        x = lists_of(b, L)
        written = b.inputs[:, L + 1: L + k]  # y_0 .. y_{k-2}; the current token c is y_{k-1}
        copies = (x == c[:, None]).sum(1)
        used = (written == c[:, None]).sum(1) + 1
        above = torch.where(x > c[:, None], x, torch.full_like(x, 10 ** 6)).min(1).values
        return torch.where((copies > used) | (above == 10 ** 6), c, above)

    variables = [Variable("y_0", lambda b: lists_of(b, L).min(1).values, site=Site.of(Node("mlp", 0, position=L)),
                          description="the minimum")]
    for k in range(1, L):
        q = L + k
        variables.append(Variable(f"current_{k}", lambda b, q=q: b.inputs[:, q],
                                  site=Site.of(Node("embed", position=q)),
                                  description=f"the current token y_{k - 1} at {q}"))
        variables.append(Variable(f"y_{k}", lambda b, k=k, **p: successor(b, k, p[f"current_{k}"]),
                                  parents=(f"current_{k}",), description="the next element after the current token"))
    return Mechanism("sort-next-larger", "sort", tuple(variables),
                     answer=lambda b, **v: torch.stack([v[f"y_{k}"] for k in range(L)], 1),
                     answer_parents=tuple(f"y_{k}" for k in range(L)), outputs=tuple(range(L)),
                     pseudocode="y_k = y_{k-1} if copies remain, else the smallest input above y_{k-1}  # embed @ q")


__all__ = ["PSEUDOCODE", "RUN", "mechanism", "multiset_code", "next_larger_mechanism", "order_statistic",
           "sample_with_partners", "with_written_token"]
