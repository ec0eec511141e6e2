"""The classical compare-your-neighbours' rule, and a colouring model judged against it."""

from __future__ import annotations

import json
import pytest
import torch
from torch import nn

from interp_rand.model.transformer import HookedTransformer
from interp_rand.tasks.coloring import ColoringTask
from interp_rand.tasks.coloring import neighbours, noise_rank
from interp_rand.seeded_evaluation.symmetry_rule import best_relabelling, classical_coloring, rank_patterns, rule_comparison, valid_on

TASK = ColoringTask(n_vertices=8)


def ring_batch(noise: list[float]):
    order = torch.arange(len(noise))[None]  # vertex i at ring position i
    return ColoringTask(n_vertices=len(noise)).build(order, torch.tensor(noise)[None, :, None])


def test_neighbours_and_noise_ranks_are_the_colouring_tasks_facts():
    # ring 0 - 2 - 1 - 3 - 0 (vertex ids at ring positions), noise per vertex id
    order = torch.tensor([[0, 2, 1, 3]])
    batch = ColoringTask(n_vertices=4).build(order, torch.tensor([[[0.1], [0.9], [0.5], [0.3]]]))
    assert neighbours(batch).tolist() == [[[2, 3], [2, 3], [0, 1], [0, 1]]]
    # vertex 0 (0.1) < 0.5, 0.3: rank 0; vertex 1 (0.9) > both: 2; vertex 2 (0.5): 1; vertex 3 (0.3): 1
    assert noise_rank(batch).tolist() == [[0, 2, 1, 1]]
    import probes.symmetry

    assert probes.symmetry.neighbours is neighbours and probes.symmetry.noise_rank is noise_rank  # one owner


def test_classical_rule_on_hand_made_rings():
    alternating = ring_batch([0.1, 0.9, 0.2, 0.8])
    colours = classical_coloring(alternating.seeds[..., 0], neighbours(alternating))
    assert colours.tolist() == [[1, 0, 1, 0]] and valid_on(colours, neighbours(alternating)).item()
    # a monotone run: vertices 1 and 2 are neither extremum, both take colour 2 and clash
    monotone = ring_batch([0.1, 0.2, 0.3, 0.4])
    colours = classical_coloring(monotone.seeds[..., 0], neighbours(monotone))
    assert colours.tolist() == [[1, 2, 2, 0]] and not valid_on(colours, neighbours(monotone)).item()


class RuleModel(HookedTransformer):
    """The colouring model's call signature, colouring exactly by the classical rule with its
    colours renamed by ``names``; or, with ``by_id``, by vertex id only (noise ignored)."""

    def __init__(self, names=(2, 0, 1), by_id: bool = False):
        super().__init__(TASK.model_config())
        self.names, self.by_id = torch.tensor(names), by_id

    def forward(self, inputs, seeds=None, attention_mask=None):
        nbrs = attention_mask.float().topk(2, dim=-1).indices.sort(-1).values
        rule = classical_coloring(seeds[..., 0], nbrs)
        colour = inputs.argmax(-1) % 3 if self.by_id else self.names[rule]
        return nn.functional.one_hot(colour, 3).float()


def test_a_model_that_is_the_classical_rule_agrees_fully():
    batch = TASK.sample(512, torch.Generator().manual_seed(0))
    result = rule_comparison(RuleModel(), TASK, batch, torch.Generator().manual_seed(1))
    assert result.agreement == 1.0 and result.whole_agreement == 1.0 and result.relabelling == [2, 0, 1]
    assert result.model_success == result.classical_success
    assert 0 < result.classical_success < 1  # the one-round rule fails on some cycles
    # the 1-hop pattern is the rule: rank 2 (max) -> 2, rank 0 (min) -> 0, middle -> 1
    assert result.one_hop.patterns == ["r=0", "r=1", "r=2"] and result.one_hop.most_common == [0, 1, 2]
    assert result.one_hop.accuracy == 1.0 and result.two_hop.accuracy == 1.0
    # controls: patterns of other rows predict the colour far worse, as does other noise
    assert result.one_hop.accuracy_shuffled < 0.6 and result.agreement_shuffled < 0.6
    json.dumps(result.to_dict())


def test_a_noise_blind_model_is_not_the_rule():
    batch = TASK.sample(512, torch.Generator().manual_seed(0))
    result = rule_comparison(RuleModel(by_id=True), TASK, batch, torch.Generator().manual_seed(1))
    assert result.agreement < 0.5
    assert result.one_hop.accuracy == pytest.approx(result.one_hop.accuracy_shuffled, abs=0.03)


def test_two_hop_patterns_and_relabelling():
    batch = ring_batch([0.1, 0.9, 0.2, 0.8, 0.5])
    code, names = rank_patterns(batch, 2)
    # vertex 4 (0.5): neighbours 0.8 and 0.1 -> rank 1; its neighbours are a max (3) and a min (0)
    assert names[int(code[0, 4])] == "r=1 nbrs=02"
    with pytest.raises(ValueError, match="hops"):
        rank_patterns(batch, 3)
    colour = torch.tensor([[1, 2, 0]])
    assert best_relabelling(colour, torch.tensor([[0, 1, 2]]), 3)[:2] == (1.0, [1, 2, 0])
