"""``explain`` on seeded tasks: the seed-program library and the seed experiment that separates a
program reading the seed from its rival that does not. Models whose algorithm is known (a
module that runs a library program, colours renamed or not, or one no program describes), then
the zoo's recall models (the randomized one uses its seed and no program follows it; its ERM
twin ignores its seed and ``lookup`` holds) and the colouring flagship's declared rule."""

import json
from types import SimpleNamespace

import pytest
import torch

from circuits.explain import SEED_PROGRAMS, SeedProgram, explain, explain_seeded
from circuits.explain.seed_programs import greedy_rounds, hashed_codes, local_extremum
from interp_rand.tasks.coloring import ColoringTask, neighbours
from interp_rand.training import load_checkpoint


class RuleModel(torch.nn.Module):
    """A stand-in model whose colours are ``rule(noise, neighbours)`` (one-hot logits), renamed by ``names``."""

    def __init__(self, rule, names=(0, 1, 2)):
        super().__init__()
        self.rule, self.names = rule, torch.tensor(names)

    def forward(self, inputs, seeds=None, attention_mask=None):
        nbrs = neighbours(SimpleNamespace(attention_mask=attention_mask))
        colours = self.names[self.rule(seeds[..., 0], nbrs)]
        return torch.nn.functional.one_hot(colours, 3).float() * 10


def ids_rule(noise, nbrs):
    return local_extremum(torch.arange(noise.shape[1], dtype=torch.float32).expand_as(noise), nbrs)


def scrambled_rule(noise, nbrs):  # reads the seed, but no program of the library: the noise's 7th multiple's digit
    return ((noise * 7 % 1) * 3).long().clamp(max=2)


TASK = ColoringTask(n_vertices=6)


def test_the_seed_experiment_chooses_the_seed_reading_program_and_rejects_its_seed_free_rival():
    found = explain_seeded(RuleModel(local_extremum, names=(2, 0, 1)), TASK, n=300, route=False)
    assert found.uses_seed and found.chosen == "local_extremum" and found.verdict == "holds"
    best = found.score("local_extremum")
    assert best.match == 1.0 and best.relabelling == [2, 0, 1] and best.follows == 1.0 and best.follows_seed
    rival = found.score("local_extremum_ids")  # the same round on the ids: never moves with the seed
    assert rival.moves == 0.0 and rival.follows == rival.control and not rival.follows_seed
    assert rival.seed_claim().verdict.outcome == "fails"
    assert [c.verdict.outcome for c in found.claims()] == ["holds", "holds"]  # its match and the seed experiment
    assert any(line.startswith("local_extremum_ids:") and "reads no seed" in line for line in found.rejected())


def test_a_model_that_ignores_its_seed_is_explained_by_the_seed_free_program():
    found = explain_seeded(RuleModel(ids_rule), TASK, n=300, route=False)
    assert not found.uses_seed and found.model_moves == 0.0 and found.n_moved == 0
    assert found.chosen == "local_extremum_ids" and found.verdict == "holds"
    assert found.score("local_extremum").match < 0.9  # the seed-reading version does not match it
    assert found.score("local_extremum_ids").follows is None  # nothing moved: nothing to follow (no division by 0)
    assert found.score("local_extremum_ids").seed_claim().verdict.outcome == "inconclusive"
    assert [c.verdict.outcome for c in found.claims()] == ["holds"]  # its match; no seed use to follow


def test_a_seed_use_no_program_describes_fails_with_where_it_falls_short():
    found = explain_seeded(RuleModel(scrambled_rule), TASK, n=300, route=False)
    assert found.uses_seed and not found.fits and found.verdict == "fails"
    assert found.headline().startswith("no program both matches the model and follows its seed")
    assert found.shortfall() and found.shortfall()[0].startswith("match ")


def test_a_user_program_is_scored_beside_the_library():
    mine = SeedProgram("coloring", "test_extremum_copy", "local_extremum, written again by a user",
                       lambda batch, task: local_extremum(batch.seeds[..., 0], neighbours(batch)), True, relabel=True)
    with SEED_PROGRAMS.temporarily("coloring/test_extremum_copy", mine):
        found = explain_seeded(RuleModel(local_extremum), TASK, n=200, route=False)
    assert found.score("test_extremum_copy").match == 1.0 and found.score("test_extremum_copy").follows_seed


def test_greedy_rounds_and_hashed_codes():
    nbrs = torch.tensor([[[1, 3], [0, 2], [1, 3], [0, 2]]])  # the ring 0-1-2-3-0
    assert greedy_rounds(torch.tensor([[4.0, 3.0, 2.0, 1.0]]), nbrs).tolist() == [[0, 1, 0, 2]]
    a = hashed_codes(torch.tensor([5] * 64), torch.arange(64), 64)
    assert torch.equal(a, hashed_codes(torch.tensor([5] * 64), torch.arange(64), 64))  # a function of (seed, key)
    overlap = (a @ a.T / 64 - torch.eye(64)).abs()
    assert overlap.max() < 0.6 and overlap.mean() < 0.15  # distinct keys' codes nearly orthogonal
    assert (hashed_codes(torch.tensor([6] * 64), torch.arange(64), 64) != a).float().mean() > 0.3  # the seed redraws them


@pytest.mark.parametrize("run, uses_seed", [("zoo:recall-Aq_R", True), ("zoo:recall-AE_R", False)])
def test_zoo_recall_randomized_model_uses_its_seed_and_its_erm_twin_does_not(run, uses_seed):
    ckpt = load_checkpoint(run)
    found = explain(ckpt.model().eval(), ckpt.spec.make_task(), n=400)
    lookup = found.score("lookup")
    assert found.uses_seed is uses_seed and lookup.follows == lookup.control
    if uses_seed:  # lookup is the task's answer, but the model's moves with the seed: lookup cannot be it
        assert found.verdict == "fails" and any(line.startswith("lookup:") or "lookup" in found.headline()
                                                for line in found.rejected())
        assert found.route and found.route[0][1] > 0.5  # the seed acts through some node
    else:
        assert found.chosen == "lookup" and found.verdict == "holds"


def test_explain_cli_on_the_colouring_model_scores_the_declared_rule_and_rejects_its_ids_rival(tmp_path, capsys):
    from interp_rand.cli.main import main

    assert main(["--threads", "1", "explain", "zoo:coloring-Aq_R", "--out", str(tmp_path), "--n", "300"]) == 0
    data = json.loads((tmp_path / "explain.json").read_text())
    programs = {p["program"]: p for p in data["programs"]}
    assert data["kind"] == "seeded" and data["uses_seed"]
    assert programs["id_classes_noise_split"]["follows_seed"] and not programs["id_classes_ids_split"]["follows_seed"]
    assert data["chosen"] == "id_classes_noise_split" and "a0.0" in data["pseudocode"]
    page = (tmp_path / "explain.html").read_text()
    assert "Rivals and the experiments that rejected them" in page and "id_classes_ids_split" in page


def test_a_fixed_seed_model_is_scored_at_r0_and_never_asked_to_follow_another_seed():
    from interp_rand.reports.explain import explain_report

    found = explain_report("zoo:recall-Aq_r0", n=300).explanation  # trained at r0 alone: another seed is off its training
    assert found.config["seed_source"] == "fixed" and found.config["n"] == 300
    assert found.n_moved == 0 and not found.uses_seed and found.route == []
    assert "fixed-seed model" in found.headline() and found.chosen == "lookup"
    ckpt = load_checkpoint("zoo:recall-Aq_r0")  # a model given in Python says its seed source itself
    given = explain_report(model=ckpt.model(), task=ckpt.spec.make_task(), n=300, seed_source="fixed").explanation
    assert given.config["seed_source"] == "fixed" and given.score("lookup").match == found.score("lookup").match
    with pytest.raises(ValueError, match="seed_source='r0' is not allowed; choose from"):
        explain_seeded(RuleModel(local_extremum), TASK, n=50, route=False, seed_source="r0")
