import pytest
import torch

from interp_rand import HookedTransformer, make_task
from interp_rand.model.bridge import to_bridge
from probes.attention import attention_patterns, conditional_patterns
from probes.head_roles import role_names, score_roles


@pytest.mark.parametrize("name, kw", [("addition", dict(n_digits=3)), ("sort", dict(length=5, vocab=8))])
def test_a_hand_built_previous_token_head(previous_token_model, name, kw):
    task = make_task(name, **kw)
    model = previous_token_model(task)
    batch = task.sample(200, torch.Generator().manual_seed(0))
    for m in (model, to_bridge(model)):
        roles = score_roles(m, task, batch)
        assert set(roles.scores) == set(role_names(task))
        assert roles.scores["previous_token"][0, 0] > 0.99
        others = [r for r in roles.scores if r != "previous_token"]
        assert others  # aligned_digit, carry_source / next_larger
        for role in others:
            # sort: position L reads x_(L-1), which has rank 0 for 1 list in 5
            assert roles.scores[role][0, 0] < 0.05, role
        # the zero-weight heads attend uniformly: neither ~1 nor ~0 on previous-token
        assert 0.1 < roles.scores["previous_token"][0, 1] < 0.5
        assert roles.best("previous_token")[:2] == (0, 0)
        assert "q-1" in roles.templates["previous_token"]


def test_scores_lie_in_0_1_for_every_task_and_seed_reader():
    g = torch.Generator().manual_seed(0)
    for name, kw, extra in [("recall", dict(n_pairs=5, value_bits=2, seed_bits=3), dict(d_model=16)),
                            ("coloring", dict(n_vertices=6), {}),
                            ("recall", dict(n_pairs=5, value_bits=2, seed_bits=3),
                             dict(d_model=16, seed_mode="token", d_input_mlp=0, n_ctx=7))]:
        task = make_task(name, **kw)
        model = HookedTransformer(task.model_config(**extra), seed=0).eval()
        batch = task.sample(32, g)
        roles = score_roles(model, task, batch, generator=g)
        for role, s in roles.scores.items():
            assert s.shape == (2, 1) and s.min() >= 0 and s.max() <= 1 + 1e-6, role
        assert "seed_reader" in roles.scores
    # colouring's mask allows only the two neighbours
    assert roles is not None
    task = make_task("coloring", n_vertices=6)
    model = HookedTransformer(task.model_config(), seed=0).eval()
    roles = score_roles(model, task, task.sample(32, g), generator=g)
    assert torch.allclose(roles.scores["neighbour"], torch.ones(2, 1))
    with torch.no_grad():
        model.seed_embed.W_seed.zero_()  # seed unread: redrawing it cannot move any pattern
    assert score_roles(model, task, task.sample(32, g), ["seed_reader"], generator=g).scores["seed_reader"].max() < 1e-6


def test_unknown_role_and_conditional_patterns():
    task = make_task("addition", n_digits=3)
    model = HookedTransformer(task.model_config(d_model=16, n_heads=2), seed=0).eval()
    batch = task.sample(100, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"do not apply to task 'addition'; available: \['previous_token'"):
        score_roles(model, task, batch, ["key_match"])
    patterns = attention_patterns(model, batch)
    assert patterns.shape == (100, 2, 2, 11, 11)
    means = conditional_patterns(task, batch, patterns)
    assert set(means) == {"all", "cascade >= 2", "no carry"}
    no_carry = batch.metadata["carry_in"].sum(1) == 0
    torch.testing.assert_close(means["no carry"], patterns[no_carry].mean(0))
    torch.testing.assert_close(means["all"].sum(-1), torch.ones(2, 2, 11))
