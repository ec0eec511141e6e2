"""Head-role scores: how much of each head's attention falls where a role's template says it
should, built from the task's metadata.

A template is ``(target [batch, q, k] in {0, 1}, weight [batch, q] >= 0)``: at each weighted
query row, the keys the role would read. A head's score is the weighted mean over rows of the
attention mass on those keys, with each row normalised to sum 1 (``|pattern|`` for linear
attention), so it lies in [0, 1]: 1 means the head does exactly that, 0 never.

Roles: ``previous_token`` (any task); ``aligned_digit``, ``carry_source`` (addition);
``next_larger`` (sort); ``key_match`` (recall); ``neighbour``, ``lower_noise_neighbour``
(coloring); ``seed_reader`` (models with a seed channel: attention on a seed token, or, when the
seed enters every token, how far redrawing only the seed moves the pattern, as total variation).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import Tensor, nn

from interp_rand.registry import Registry
from interp_rand.distances import total_variation
from interp_rand.tasks.base import Batch
from probes.activations import seed_offset
from probes.attention import attention_patterns, task_slice

ANY_TASK = "*"


@dataclass(frozen=True)
class HeadRole:
    """A registered role: ``template(task, batch) -> (target, weight)`` on task positions."""

    name: str
    description: str
    tasks: tuple[str, ...]
    template: Callable[[object, Batch], tuple[Tensor, Tensor]] | None


@dataclass(frozen=True)
class RoleScores:
    """Scores ``[layer, head]`` in [0, 1] per role, with the template each one used."""

    scores: dict[str, Tensor]
    templates: dict[str, str]
    mean_templates: dict[str, Tensor] = field(default_factory=dict)  # [q, k] average target

    def best(self, role: str) -> tuple[int, int, float]:
        s = self.scores[role]
        layer, head = divmod(int(s.argmax()), s.shape[1])
        return layer, head, float(s[layer, head])


HEAD_ROLES: Registry[HeadRole] = Registry("head role")  # in registration order


def register_role(name: str, description: str, tasks: tuple[str, ...] = (ANY_TASK,)):
    """Decorator: register a template function for ``tasks`` in :data:`HEAD_ROLES` (a taken
    name is refused)."""

    def add(fn):
        HEAD_ROLES.register(name, HeadRole(name, description, tasks, fn), description=description)
        return fn

    return add


def role_names(task) -> list[str]:
    """Roles that apply to ``task`` (``seed_reader`` only where the task has seeds)."""
    names = [r.name for r in (e.value for e in HEAD_ROLES.entries()) if ANY_TASK in r.tasks or task.name in r.tasks]
    if hasattr(task, "d_seed"):
        names.append("seed_reader")
    return names


def template_score(patterns: Tensor, target: Tensor, weight: Tensor) -> Tensor:
    """``patterns [batch, layer, head, q, k]``, ``target [batch, q, k]``, ``weight [batch, q]``
    -> ``[layer, head]`` weighted mean attention mass on the target keys."""
    mass = patterns.abs()
    mass = mass / mass.sum(-1, keepdim=True).clamp_min(1e-12)  # rows sum to 1
    on_target = (mass * target[:, None, None]).sum(-1)  # [b, L, H, q]
    w = weight[:, None, None]
    return (on_target * w).sum((0, 3)) / w.sum((0, 3)).clamp_min(1e-12)


def score_roles(model: nn.Module, task, batch: Batch, roles: list[str] | None = None,
                patterns: Tensor | None = None, *, generator: torch.Generator | None = None) -> RoleScores:
    """Score every head for ``roles`` (default: all that apply to the task)."""
    available = role_names(task)
    roles = available if roles is None else list(roles)
    unknown = [r for r in roles if r not in available]
    if unknown:
        raise ValueError(f"role(s) {unknown} do not apply to task {task.name!r}; available: {available}")
    patterns = attention_patterns(model, batch) if patterns is None else patterns
    task_patterns = task_slice(model, patterns)
    scores, templates, means = {}, {}, {}
    for name in roles:
        if name == "seed_reader":
            scores[name], templates[name] = _seed_reader(model, task, batch, patterns, generator)
            continue
        role = HEAD_ROLES.get(name)
        target, weight = role.template(task, batch)
        scores[name] = template_score(task_patterns, target.float(), weight.float())
        templates[name] = role.description
        w = weight.float()[..., None]
        means[name] = (target.float() * w).sum(0) / w.sum(0).clamp_min(1e-12)
    return RoleScores(scores=scores, templates=templates, mean_templates=means)


def _seed_reader(model, task, batch, patterns, generator) -> tuple[Tensor, str]:
    if seed_offset(model):
        n = patterns.shape[-1]
        target = torch.zeros(len(batch), n, n)
        target[:, :, 0] = 1
        weight = torch.ones(len(batch), n)
        weight[:, 0] = 0  # the seed token reads only itself
        return template_score(patterns, target, weight), "attention on the seed token (position 0)"
    generator = generator if generator is not None else torch.Generator().manual_seed(0)
    redrawn = task.with_seeds(batch, task.sample_seeds(len(batch), generator))
    other = attention_patterns(model, redrawn)

    def normalised(p: Tensor) -> Tensor:
        p = p.abs()
        return p / p.sum(-1, keepdim=True).clamp_min(1e-12)

    tv = total_variation(normalised(patterns), normalised(other))  # [b, L, H, q]
    return tv.mean((0, 3)), "total variation between patterns for the same input with a redrawn seed"


def _one_key(batch_size: int, n_pos: int, query: Tensor, key: Tensor, rows: Tensor | None = None):
    """Template with one target key per (row, query): ``query``/``key`` ``[m]`` positions for
    ``rows`` ``[m]`` (all rows repeated when ``None``)."""
    target = torch.zeros(batch_size, n_pos, n_pos)
    weight = torch.zeros(batch_size, n_pos)
    target[rows, query, key] = 1
    weight[rows, query] = 1
    return target, weight


# ---------------------------------------------------------------------- templates


@register_role("previous_token", "query q reads key q-1 (every query but the first)")
def _previous(task, batch: Batch):
    n, P = batch.inputs.shape[:2]
    q = torch.arange(1, P)
    rows = torch.arange(n).repeat_interleave(P - 1)
    return _one_key(n, P, q.repeat(n), (q - 1).repeat(n), rows)


def _operand_pos(task, place: int) -> tuple[int, int]:
    """Input positions of ``a_place`` and ``b_place`` (operands are written msb first)."""
    n = task.n_digits
    return n - 1 - place, 2 * n - place


def _addition_template(task, batch: Batch, source_offset: int, need_carry: bool):
    n, P = batch.inputs.shape[:2]
    target = torch.zeros(n, P, P)
    weight = torch.zeros(n, P)
    for k, place in enumerate(task.answer_places().tolist()):
        src = place - source_offset
        if not 0 <= src < task.n_digits:
            continue
        q = int(batch.answer_positions[k])
        a_pos, b_pos = _operand_pos(task, src)
        rows = batch.metadata["carry_in"][:, k] == 1 if need_carry else torch.ones(n, dtype=torch.bool)
        target[rows, q, a_pos] = 1
        target[rows, q, b_pos] = 1
        weight[rows, q] = 1
    return target, weight


@register_role("aligned_digit", "the answer digit of place p reads a_p and b_p", ("addition",))
def _aligned(task, batch: Batch):
    return _addition_template(task, batch, 0, need_carry=False)


@register_role("carry_source", "where a carry enters place p, its digit reads a_(p-1) and b_(p-1)", ("addition",))
def _carry_source(task, batch: Batch):
    return _addition_template(task, batch, 1, need_carry=True)


@register_role("next_larger", "answer position L+k reads the input element of rank k (the next in sorted order)",
               ("sort",))
def _next_larger(task, batch: Batch):
    n, P = batch.inputs.shape[:2]
    rank = batch.metadata["rank"]  # [b, L]
    element = rank.argsort(1)  # [b, L]: input position of rank k (stable ranks are a permutation)
    rows = torch.arange(n).repeat_interleave(task.length)
    query = batch.answer_positions.repeat(n)
    return _one_key(n, P, query, element.flatten(), rows)


@register_role("key_match", "the query reads the pair holding the queried key", ("recall",))
def _key_match(task, batch: Batch):
    n, P = batch.inputs.shape[:2]
    rows = torch.arange(n)
    return _one_key(n, P, torch.full((n,), task.n_pairs), batch.metadata["query_index"], rows)


@register_role("neighbour", "each vertex reads its two cycle neighbours (the mask allows only these)",
               ("coloring",))
def _neighbour(task, batch: Batch):
    mask = batch.attention_mask.float()
    return mask, torch.ones(mask.shape[:2])


@register_role("lower_noise_neighbour", "each vertex reads the neighbour whose noise is lower", ("coloring",))
def _lower_noise(task, batch: Batch):
    noise = batch.seeds[..., 0]  # [b, N]
    nbrs = batch.attention_mask.float().topk(2, dim=-1).indices  # [b, N, 2]
    nbr_noise = noise.gather(1, nbrs.flatten(1)).view_as(nbrs)
    lower = nbrs.gather(-1, nbr_noise.argmin(-1, keepdim=True))[..., 0]  # [b, N]
    n, N = noise.shape
    rows = torch.arange(n).repeat_interleave(N)
    return _one_key(n, N, torch.arange(N).repeat(n), lower.flatten(), rows)


__all__ = ["HEAD_ROLES", "HeadRole", "RoleScores", "register_role", "role_names", "score_roles", "template_score"]
