"""The conventions a model of elsewhere may differ in are config fields, stored and checked:
the input MLP's activation, recall's key order and the fixed seed r0. Their defaults keep the
zoo's models as they were."""

import json
import shutil

import pytest
import torch

from interp_rand.model import HookedTransformer
from interp_rand.tasks import make_task
from interp_rand.tasks.randomized import first_seed
from interp_rand.training.checkpoint import CheckpointError, load_checkpoint, read_meta


def test_zoo_checkpoint_reads_with_the_old_conventions():
    ckpt = load_checkpoint("zoo:recall-AE_r0")
    task = ckpt.spec.make_task()
    assert ckpt.spec.model_config.input_mlp_act == "gelu"  # erf GELU, as before the field existed
    assert task.key_order == "permuted" and task.r0 == "toolkit"
    assert torch.equal(task.fixed_seed(), first_seed(task))
    # the stored task config is unchanged by the new fields (they are left out at their defaults)
    _, meta = read_meta("zoo:recall-AE_r0")
    assert task.config_dict() == meta["task"]["config"]
    model = ckpt.model()
    assert model.input_mlp.act(torch.tensor([1.0])).item() == pytest.approx(torch.nn.functional.gelu(torch.tensor(1.0)).item(), abs=0)


def test_input_mlp_act_changes_the_input_mlp_only():
    task = make_task("recall", n_pairs=4)
    erf = HookedTransformer(task.model_config(), seed=0).eval()
    tanh = HookedTransformer(task.model_config(input_mlp_act="gelu_new"), seed=0).eval()
    batch = task.sample(8, torch.Generator().manual_seed(0))
    difference = (erf(batch.inputs, batch.seeds) - tanh(batch.inputs, batch.seeds)).abs().max().item()
    assert 0 < difference < 0.1  # the two GELUs differ by at most ~5e-4 per unit
    with pytest.raises(ValueError, match="input_mlp_act='gelu_tanh' is not allowed"):
        task.model_config(input_mlp_act="gelu_tanh")


def test_identity_key_order_puts_key_i_at_position_i():
    task = make_task("recall", n_pairs=5, key_order="identity")
    batch = task.sample(16, torch.Generator().manual_seed(1))
    assert torch.equal(batch.metadata["key_order"], torch.arange(5).expand(16, 5))
    assert torch.equal(batch.inputs[:, :5, :5], torch.eye(5).expand(16, 5, 5))
    assert not torch.equal(make_task("recall", n_pairs=5).sample(16, torch.Generator().manual_seed(1)).metadata["key_order"],
                           batch.metadata["key_order"])
    with pytest.raises(ValueError, match="key_order='sorted' is not allowed"):
        make_task("recall", key_order="sorted")


def test_r0_bits_unknown_and_refusal():
    assert torch.equal(make_task("recall", n_pairs=4, r0="1100000001").fixed_seed(),
                       torch.tensor([1.0, 1, 0, 0, 0, 0, 0, 0, 0, 1]))
    with pytest.raises(ValueError, match="r0 that is not known"):
        make_task("recall", r0="unknown").fixed_seed()
    with pytest.raises(ValueError, match="must be 'toolkit', 'unknown' or seed_bits=10 characters"):
        make_task("recall", r0="101")


def test_fixed_seed_run_stores_r0_and_a_wrong_one_is_refused(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(read_meta("zoo:recall-AE_r0")[0], run / "checkpoints" / "step_0000001")
    ckpt = load_checkpoint(run)
    from interp_rand.training.checkpoint import fixed_seed_entry

    entry = fixed_seed_entry(ckpt.spec)
    assert entry["r0"] == first_seed(ckpt.spec.make_task()).tolist()
    meta_file = ckpt.path / "checkpoint.json"
    meta = json.loads(meta_file.read_text())
    meta["r0"] = [1.0 - b for b in entry["r0"]]  # a seed the task does not give
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="stores r0=.* but its task gives"):
        load_checkpoint(run)
    meta["r0"] = entry["r0"]
    meta_file.write_text(json.dumps(meta))
    assert load_checkpoint(run).step == ckpt.step
