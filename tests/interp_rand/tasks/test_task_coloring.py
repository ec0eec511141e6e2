"""ColoringTask: tokens are vertex ids in id order and the cycle lives only in the per-example
attention mask (checked against a Python reference built from ``order``), the task is not
solvable by position, the edge-conflict loss and correctness on hand-made logits, valid_colorings,
exhaustive enumeration against canonical forms, per-vertex seeds and their locality in the
model, corruption, validation."""

import dataclasses
import itertools

import pytest
import torch

from interp_rand.evaluation import evaluate
from interp_rand.losses import answer_correct, answer_loss, loss_kinds
from interp_rand.model import HookedTransformer
from interp_rand.tasks import ColoringTask, RandomizedTask, make_task, task_names
from interp_rand.tasks.coloring import (
    COLORING_CPU,
    COLORING_PAPER,
    check_adjacency,
    coloring_correct,
    ring_adjacency,
    valid_colorings,
)
from interp_rand.training.config import TrainConfig


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def canonical(order: list[int]) -> tuple[int, ...]:
    """The smallest rotation/reflection of a ring: equal iff the two rings are the same cycle."""
    n = len(order)
    forms = [order[i:] + order[:i] for i in range(n)]
    forms += [list(reversed(form)) for form in forms]
    return min(tuple(form) for form in forms)


def edges(order: list[int]) -> set[frozenset[int]]:
    return {frozenset((order[i], order[(i + 1) % len(order)])) for i in range(len(order))}


def reference_adjacency(order: list[int]) -> torch.Tensor:
    """``[N, N]`` bool, by plain Python: vertex ids ``u ~ v`` iff they are ring neighbours."""
    n = len(order)
    adjacency = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        u, v = order[i], order[(i + 1) % n]
        adjacency[u, v] = adjacency[v, u] = True
    return adjacency


def within_hops(order: list[int], vertex: int, hops: int) -> torch.Tensor:
    """``[N]`` bool: the vertices at graph distance <= ``hops`` from ``vertex`` on the cycle."""
    n = len(order)
    at = order.index(vertex)
    near = torch.zeros(n, dtype=torch.bool)
    for step in range(-hops, hops + 1):
        near[order[(at + step) % n]] = True
    return near


def by_vertex(by_ring: list[list[int]], ring_position: torch.Tensor) -> list[list[int]]:
    """Per-row values given by ring position -> the same values indexed by vertex id."""
    return [[row[p] for p in positions] for row, positions in zip(by_ring, ring_position.tolist())]


def confident(colours: list[list[int]], n_colors: int = 3) -> torch.Tensor:
    """``[batch, N, n_colors]`` logits putting (almost) all probability on ``colours``."""
    return 50.0 * torch.nn.functional.one_hot(torch.tensor(colours), n_colors).float()


def test_shapes_layout_and_seeds():
    task = ColoringTask(n_vertices=7)
    batch = task.sample(16, gen())
    assert batch.inputs.shape == (16, 7, 7) and batch.inputs.dtype == torch.float32
    # Token v is one_hot(v) in every row: the inputs say nothing about the cycle.
    assert torch.equal(batch.inputs, torch.eye(7).expand(16, 7, 7))
    assert batch.seeds.shape == (16, 7, 1) and ((batch.seeds >= 0) & (batch.seeds < 1)).all()
    assert len(batch.seeds.unique()) == 16 * 7  # fresh noise per vertex and example
    assert batch.attention_mask.shape == (16, 7, 7) and batch.attention_mask.dtype == torch.bool
    assert batch.loss_mask.all() and torch.equal(batch.answer_positions, torch.arange(7))
    order, ring_position = batch.metadata["order"], batch.metadata["ring_position"]
    assert torch.equal(order.sort(1).values, torch.arange(7).expand(16, 7))
    assert len(order.unique(dim=0)) > 1  # the cycles differ between rows
    # ring_position inverts order: the vertex at ring position ring_position[v] is v.
    for row in range(16):
        for v in range(7):
            assert order[row, ring_position[row, v]] == v
    # Targets: the reference colouring by ring position, read per vertex id, so a valid
    # colouring of each row's own cycle.
    reference = [0, 1, 0, 1, 0, 1, 2]
    for row in range(16):
        for i, v in enumerate(order[row].tolist()):
            assert batch.targets[row, v] == reference[i]
    assert valid_colorings(batch.targets[:, None], batch.attention_mask).all()


def test_mask_allows_exactly_the_two_ring_neighbours():
    for n in (3, 4, 10):
        batch = ColoringTask(n_vertices=n).sample(6, gen(n))
        mask, order = batch.attention_mask, batch.metadata["order"]
        assert torch.equal(mask, mask.transpose(1, 2)) and not mask.diagonal(dim1=1, dim2=2).any()
        assert (mask.sum(-1) == 2).all()
        for row in range(6):
            ring = order[row].tolist()
            # Exactly the two ring neighbours of each vertex id, against a Python reference.
            assert torch.equal(mask[row], reference_adjacency(ring))
            for i, v in enumerate(ring):
                assert set(mask[row, v].nonzero()[:, 0].tolist()) == {ring[i - 1], ring[(i + 1) % n]}
            # The graph of the tokens is the cycle of the sampled order.
            token_edges = {frozenset((u, v)) for u, v in mask[row].nonzero().tolist()}
            assert token_edges == edges(ring)
        # Rows share a mask iff they are the same cycle (always for the triangle).
        forms = [canonical(ring) for ring in order.tolist()]
        for a, b in itertools.combinations(range(6), 2):
            assert torch.equal(mask[a], mask[b]) == (forms[a] == forms[b])
        if n == 10:
            assert len(set(forms)) > 1  # the comparison above saw different cycles


def test_check_adjacency_names_what_is_wrong():
    ring = ring_adjacency(5)
    check_adjacency(ring)
    check_adjacency(ring.expand(3, 5, 5))
    asymmetric = ring.clone()
    asymmetric[0, 1] = False
    asymmetric[0, 2] = True  # still degree 2, but 0 -> 2 without 2 -> 0
    with pytest.raises(ValueError, match=r"not symmetric at .*\(0, 0, 1\)"):
        check_adjacency(asymmetric)
    loop = ring.clone()
    loop[3, 3] = True
    with pytest.raises(ValueError, match=r"attend itself .*\(0, 3\)"):
        check_adjacency(loop)
    chord = ring.clone()
    chord[0, 2] = chord[2, 0] = True
    with pytest.raises(ValueError, match=r"exactly 2 neighbours.*\(0, 0, 3\)"):
        check_adjacency(chord)
    with pytest.raises(ValueError, match="bool"):
        check_adjacency(ring.float())


def test_loss_zero_for_a_confident_valid_colouring_and_n_for_a_constant_one():
    task = ColoringTask(n_vertices=5)
    batch = task.sample(2, gen())
    ring_position = batch.metadata["ring_position"]
    # Valid colourings given by ring position, placed on the vertex ids of each row's cycle.
    first = task.reference_coloring()[ring_position]
    assert torch.equal(first, torch.tensor(by_vertex([[0, 1, 0, 1, 2]] * 2, ring_position)))
    valid = confident(by_vertex([[0, 1, 0, 1, 2], [2, 0, 1, 0, 1]], ring_position))
    constant = confident([[1] * 5, [0] * 5])
    assert "coloring" in loss_kinds()
    assert torch.allclose(answer_loss(confident(first.tolist()), batch, "coloring"), torch.zeros(2), atol=1e-6)
    assert torch.allclose(answer_loss(valid, batch, "coloring"), torch.zeros(2), atol=1e-6)
    assert torch.allclose(answer_loss(constant, batch, "coloring"), torch.full((2,), 5.0))
    # Uniform outputs: each of the N edges conflicts with probability 1/3.
    uniform = torch.zeros(2, 5, 3)
    assert torch.allclose(answer_loss(uniform, batch, "coloring"), torch.full((2,), 5 / 3))
    assert answer_correct(valid, batch, "coloring").all()
    assert not answer_correct(constant, batch, "coloring").any()


def test_correct_marks_exactly_the_conflicting_positions():
    task = ColoringTask(n_vertices=5)
    batch = task.sample(3, gen(1))
    ring_position = batch.metadata["ring_position"]
    # By ring position: one conflicting edge each, between ring positions 3-4, 0-1, 4-0.
    by_ring = [[0, 1, 0, 1, 1], [0, 0, 1, 2, 1], [1, 0, 2, 0, 1]]
    ok_by_ring = [[1, 1, 1, 0, 0], [0, 0, 1, 1, 1], [0, 1, 1, 1, 0]]
    colours = by_vertex(by_ring, ring_position)
    expected = torch.tensor(by_vertex(ok_by_ring, ring_position), dtype=torch.bool)
    # The same expectation from a Python reference on each row's graph.
    order = batch.metadata["order"].tolist()
    for row in range(3):
        graph = reference_adjacency(order[row])
        for v in range(5):
            in_conflict = any(colours[row][u] == colours[row][v] for u in graph[v].nonzero()[:, 0].tolist())
            assert expected[row, v] == (not in_conflict)
    assert torch.equal(answer_correct(confident(colours), batch, "coloring"), expected)
    # One conflicting edge costs 1 (of a maximum of N).
    assert torch.allclose(answer_loss(confident(colours), batch, "coloring"), torch.ones(3), atol=1e-6)


def test_valid_colorings_on_hand_made_graphs():
    # Row 0: the cycle 0-2-1-3-0; row 1: the cycle 0-1-2-3-0. Four colourings per row.
    adjacency = torch.stack([reference_adjacency([0, 2, 1, 3]), reference_adjacency([0, 1, 2, 3])])
    colours = torch.tensor([[0, 0, 1, 1], [0, 1, 0, 1], [0, 1, 2, 2], [1, 1, 1, 1]]).expand(2, 4, 4)
    expected = torch.tensor([[True, False, True, False], [False, True, False, False]])
    assert torch.equal(valid_colorings(colours, adjacency), expected)
    # Any graph, not only cycles: a single edge 1-3 on four vertices.
    edge = torch.zeros(1, 4, 4, dtype=torch.bool)
    edge[0, 1, 3] = edge[0, 3, 1] = True
    assert torch.equal(valid_colorings(colours[:1], edge), torch.tensor([[True, False, True, False]]))


def test_valid_colorings_equals_brute_force_on_random_graphs():
    generator = torch.Generator().manual_seed(0)
    upper = torch.rand(6, 7, 7, generator=generator) < 0.3
    adjacency = torch.triu(upper, diagonal=1)
    adjacency = adjacency | adjacency.transpose(1, 2)
    adjacency[0] = False  # a graph without edges: every colouring is valid
    colours = torch.randint(0, 3, (6, 5, 7), generator=generator)
    same = colours[..., :, None] == colours[..., None, :]  # [batch, k, N, N]
    brute = ~(same & adjacency[:, None]).any(-1).any(-1)
    assert torch.equal(valid_colorings(colours, adjacency), brute)
    assert valid_colorings(colours, adjacency)[0].all() and not brute.all()


def test_not_solvable_by_position():
    task = ColoringTask(n_vertices=5)
    ring, shuffled = torch.tensor([[0, 1, 2, 3, 4]]), torch.tensor([[0, 2, 4, 1, 3]])
    a, b = task.build(ring), task.build(shuffled)
    # Identical tokens, different graphs: only the mask tells the cycles apart.
    assert torch.equal(a.inputs, b.inputs) and not torch.equal(a.attention_mask, b.attention_mask)
    # A's reference colouring is valid for A but not for B (edge 0-2 is monochromatic there).
    assert valid_colorings(a.targets[:, None], a.attention_mask).all()
    assert not valid_colorings(a.targets[:, None], b.attention_mask).any()
    # No colouring of the token positions is valid for every cycle: all 3^5 fail on some cycle.
    every = ColoringTask(n_vertices=5).exhaustive()
    fixed = torch.tensor(list(itertools.product(range(3), repeat=5)))  # [243, 5]
    valid = valid_colorings(fixed.expand(len(every), 243, 5), every.attention_mask)  # [12, 243]
    assert not valid.all(0).any() and valid.any(0).any()


def test_exhaustive_enumerates_every_cycle_once():
    small = ColoringTask(n_vertices=5).exhaustive()
    assert len(small) == 12 and small.seeds.shape == (12, 5, 1) and not small.seeds.any()
    forms = {canonical(row) for row in small.metadata["order"].tolist()}
    every_cycle = {canonical(list(p)) for p in itertools.permutations(range(5))}
    assert forms == every_cycle and len(forms) == 12
    big = ColoringTask(n_vertices=10).exhaustive()
    order = big.metadata["order"]
    assert order.shape == (181_440, 10) and big.inputs.shape == (181_440, 10, 10)
    assert (order[:, 0] == 0).all() and (order[:, 1] < order[:, -1]).all()
    assert len(order.unique(dim=0)) == 181_440
    assert torch.equal(order.sort(1).values, torch.arange(10).expand(181_440, 10))
    with pytest.raises(ValueError, match="n_vertices"):
        ColoringTask(n_vertices=12).exhaustive()


def test_per_vertex_seeds_reach_their_own_token_and_act_locally():
    task = ColoringTask(n_vertices=8)
    batch = task.sample(3, gen(2))
    order = batch.metadata["order"].tolist()
    model = HookedTransformer(task.model_config(n_layers=1), seed=0)
    _, cache = model.run_with_cache(batch.inputs, **batch.model_kwargs())
    assert torch.equal(cache["hook_seed"], batch.seeds)
    logits = model(batch.inputs, **batch.model_kwargs())
    for vertex in (0, 3, 7):
        seeds = batch.seeds.clone()
        seeds[:, vertex] += 0.5
        moved = model(batch.inputs, seeds=seeds, attention_mask=batch.attention_mask)
        changed = (moved - logits).abs().amax(-1) > 1e-6  # [batch, N]
        # The vertex itself and its two neighbours in each row's own graph.
        local = torch.stack([within_hops(ring, vertex, 1) for ring in order])
        assert (local.sum(1) == 3).all() and torch.equal(changed, local)
    # Two rounds of message passing reach two hops.
    deep = HookedTransformer(task.model_config(), seed=0)
    seeds = batch.seeds.clone()
    seeds[:, 0] += 0.5
    change = deep(batch.inputs, seeds=seeds, attention_mask=batch.attention_mask) - deep(
        batch.inputs, **batch.model_kwargs())
    two_hops = torch.stack([within_hops(ring, 0, 2) for ring in order])
    assert (two_hops.sum(1) == 5).all() and torch.equal(change.abs().amax(-1) > 1e-6, two_hops)


def test_fixed_seed_with_seeds_and_no_enumeration():
    task = ColoringTask(n_vertices=6)
    r0 = task.fixed_seed()
    assert r0.shape == (6, 1) and torch.equal(r0, ColoringTask(n_vertices=6).fixed_seed())
    batch = task.sample(4, gen())
    replaced = task.with_seeds(batch, r0.expand(4, 6, 1))
    assert torch.equal(replaced.seeds, r0.expand(4, 6, 1))
    with pytest.raises(ValueError, match="seed_shape"):
        task.with_seeds(batch, torch.zeros(4, 6))
    with pytest.raises(ValueError, match="enumerated"):
        task.all_seeds()


def test_model_config_and_evaluate():
    task = ColoringTask()
    cfg = task.model_config()
    assert (cfg.mask, cfg.attention, cfg.seed_mode, cfg.d_seed) == ("custom", "softmax", "add", 1)
    assert (cfg.d_model, cfg.d_head, cfg.n_heads, cfg.n_layers, cfg.n_ctx) == (16, 16, 1, 2, 10)
    assert (cfg.d_input, cfg.d_vocab_out, cfg.attn_only, cfg.normalization_type) == (10, 3, True, None)
    assert (cfg.positional, cfg.attn_bias, cfg.init) == ("learned", False, "fan_in")
    model = HookedTransformer(cfg, seed=0)
    result = evaluate(model, task, task.sample(64, gen(3)))
    assert 0 < result.loss < 10 and len(result.per_position) == 10


def test_corrupt_gives_another_cycle_by_one_swap():
    for n in (4, 6):
        task = ColoringTask(n_vertices=n)
        batch = task.sample(100, gen(n))
        pair = task.corrupt(batch, gen(n + 1))
        clean, corrupted = batch.metadata["order"], pair.corrupted.metadata["order"]
        assert torch.equal(pair.corrupted.seeds, batch.seeds)
        diff = clean != corrupted
        assert (diff.sum(1) == 2).all()
        assert torch.equal(pair.changed, diff.float().argmax(1))  # the lower swapped position
        for row in range(100):
            assert canonical(clean[row].tolist()) != canonical(corrupted[row].tolist())


def test_build_validation_registry_and_scales():
    task = ColoringTask(n_vertices=4)
    batch = task.build(torch.tensor([[2, 0, 3, 1]]), torch.full((1, 4, 1), 0.25))
    assert torch.equal(batch.inputs, torch.eye(4)[None])
    assert torch.equal(batch.seeds, torch.full((1, 4, 1), 0.25))
    # The ring 2-0-3-1-2 by vertex id.
    expected = torch.tensor([[0, 0, 1, 1], [0, 0, 1, 1], [1, 1, 0, 0], [1, 1, 0, 0]], dtype=torch.bool)
    assert torch.equal(batch.attention_mask[0], expected)
    assert torch.equal(batch.metadata["ring_position"], torch.tensor([[1, 3, 0, 2]]))
    assert torch.equal(batch.targets, torch.tensor([[1, 1, 0, 0]]))  # 0/1 alternating round the ring
    with pytest.raises(ValueError, match="permutation"):
        task.build(torch.tensor([[2, 2, 3, 1]]))
    with pytest.raises(ValueError, match="seeds"):
        task.build(torch.tensor([[2, 0, 3, 1]]), torch.zeros(1, 4))
    for config, field in (({"n_vertices": 2}, "n_vertices"), ({"n_colors": 2}, "n_colors")):
        with pytest.raises(ValueError, match=f"ColoringTask.{field}"):
            ColoringTask(**config)
    assert "coloring" in task_names()
    made = make_task("coloring", n_vertices=6)
    assert isinstance(made, ColoringTask) and isinstance(made, RandomizedTask)
    assert made.seed_shape == (6, 1) and made.d_seed == 1
    paper = TrainConfig.from_scale(COLORING_PAPER)
    assert (paper.batch_size, paper.weight_decay, paper.steps) == (256, 0.1, 300_000)
    assert (COLORING_PAPER.m_seeds, COLORING_PAPER.q) == (10, 10)
    assert COLORING_CPU.steps < COLORING_PAPER.steps and COLORING_CPU.n_vertices == 10


def _former_coloring_correct(picked: torch.Tensor, batch) -> torch.Tensor:
    """coloring_correct as it was before the fast evaluation (argmax; the answer mask copied)."""
    colour = picked.argmax(-1)
    positions = batch.answer_positions
    mask = batch.attention_mask[:, positions][:, :, positions]
    return ~((colour[:, :, None] == colour[:, None, :]) & mask).any(-1)


def test_correct_agrees_with_the_former_decoding_on_ties_and_the_fast_layout():
    """Ties decide by the first maximal colour, as argmax did; the fast path's transposed logits
    (colours outermost in memory) and the no-copy mask give the same answer."""
    task = ColoringTask(n_vertices=7)
    batch = task.sample(200, gen(3))
    picked = torch.randint(0, 2, (200, 7, 3), generator=gen(4)).float()  # ties on most vertices
    transposed = picked.permute(2, 0, 1).contiguous().permute(1, 2, 0)
    expected = _former_coloring_correct(picked, batch)
    assert 0 < expected.float().mean() < 1
    for logits in (picked, transposed):
        assert torch.equal(coloring_correct(logits, batch), expected)
    # answer positions that are not every position in order: the mask is selected as before
    for positions in (torch.tensor([6, 5, 4, 3, 2, 1, 0]), torch.tensor([0, 2, 3, 5])):
        part = dataclasses.replace(batch, answer_positions=positions)
        assert torch.equal(coloring_correct(picked[:, positions], part),
                           _former_coloring_correct(picked[:, positions], part))
