"""Seed-bit flip map and flip routes, on hand-made matrices and hand-set tiny recall models."""

from __future__ import annotations

import json

import pytest
import torch

from circuits.analyses.seed_bits import bit_flip_effect, bit_flip_routes, entry_nodes, flip_partners
from interp_rand.model.transformer import HookedTransformer
from interp_rand.tasks.recall import RecallTask
from probes.stored_set import stored_matrix

TASK = RecallTask(n_pairs=4, value_bits=2, seed_bits=3)


def test_flip_partners_of_the_enumerated_seeds():
    partners = flip_partners(TASK.all_seeds())  # rows are 0..7 in binary, most significant bit first
    assert partners[0].tolist() == [4, 5, 6, 7, 0, 1, 2, 3]
    assert partners[2].tolist() == [1, 0, 3, 2, 5, 4, 7, 6]
    with pytest.raises(ValueError, match="all_seeds"):
        flip_partners(TASK.all_seeds()[:5])


def test_effect_map_finds_the_deciding_bit():
    seeds = TASK.all_seeds()
    stored = torch.ones(2, 8, 4, dtype=torch.bool)
    stored[:, :, 1] = seeds[:, 2].bool()  # position 1 stored iff the last bit is on
    effect = bit_flip_effect(stored, seeds)
    assert effect.effect[2] == [0.0, 1.0, 0.0, 0.0]
    assert effect.effect[0] == effect.effect[1] == [0.0] * 4
    assert effect.strongest[0] == 2 and effect.max_effect == 1 and effect.mean_effect == pytest.approx(1 / 12)
    json.dumps(effect.to_dict())


def one_bit_model(bit: int | None) -> HookedTransformer:
    """A recall model whose output at the query is read from the query token's own input MLP
    (both heads write nothing) and whose seed is only bit ``bit`` (none: no seed use)."""
    model = HookedTransformer(TASK.model_config(d_model=16, init_range=1.0), seed=3).eval()
    with torch.no_grad():
        for block in model.blocks:
            block.attn.W_O.zero_()
        w_seed = model.seed_embed.W_seed
        keep = w_seed[bit].clone() * 8 if bit is not None else None
        w_seed.zero_()
        if keep is not None:
            w_seed[bit] = keep
    return model


def inputs(n: int = 6):
    batch = TASK.sample(n, torch.Generator().manual_seed(0))
    return batch.metadata["key_order"], batch.metadata["values"]


def test_storage_forced_onto_one_bit_acts_through_the_query_token():
    model = one_bit_model(bit=1)
    key_order, values = inputs()
    seeds = TASK.all_seeds()
    stored = stored_matrix(model, TASK, key_order, values, seeds)
    effect = bit_flip_effect(stored, seeds)
    assert effect.per_bit[1] > 0 and effect.per_bit[0] == 0 and effect.per_bit[2] == 0
    routes = bit_flip_routes(model, TASK, key_order, values, stored, seeds, [1],
                             generator=torch.Generator().manual_seed(0), n_rows=64)
    recovered, role = routes.recovered[0], routes.by_role[0]
    assert routes.n_changed[0] > 0 and recovered["full flip"] == 1.0 and recovered["input_mlp"] == 1.0
    # the query token (position N = 4) carries the whole effect; other tokens and heads none
    assert recovered["input_mlp@4"] == 1.0 and role["query token"] == 1.0
    assert role["queried pair"] == 0 and role["other pairs"] == 0 and role["a0.0"] == role["a1.0"] == 0
    assert all(v == 0 for v in routes.spurious[0].values())
    json.dumps(routes.to_dict())


def test_seed_blind_control_has_no_effect():
    model = one_bit_model(bit=None)
    key_order, values = inputs()
    stored = stored_matrix(model, TASK, key_order, values, TASK.all_seeds())
    effect = bit_flip_effect(stored, TASK.all_seeds())
    assert effect.max_effect == 0
    routes = bit_flip_routes(model, TASK, key_order, values, stored, TASK.all_seeds(), [0],
                             generator=torch.Generator().manual_seed(0))
    assert routes.n_changed == [0] and routes.by_role[0]["query token"] == 0


def test_random_model_flips_act_only_through_the_input_mlp():
    # the seed is appended to each token before the input MLP: patching the whole input MLP
    # from the flipped run reproduces every change, and the nodes are named per position
    model = HookedTransformer(TASK.model_config(d_model=16, init_range=1.0), seed=1).eval()
    key_order, values = inputs()
    seeds = TASK.all_seeds()
    stored = stored_matrix(model, TASK, key_order, values, seeds)
    effect = bit_flip_effect(stored, seeds)
    assert effect.max_effect > 0
    routes = bit_flip_routes(model, TASK, key_order, values, stored, seeds, effect.strongest[:1],
                             generator=torch.Generator().manual_seed(0), n_rows=64)
    assert routes.recovered[0]["full flip"] == 1.0 and routes.recovered[0]["input_mlp"] == 1.0
    entry, per_position, heads = entry_nodes(model, TASK.n_ctx)
    assert entry.name == "input_mlp" and [n.name for n in per_position][-1] == "input_mlp@4"
    assert [h.name for h in heads] == ["a0.0", "a1.0"]
