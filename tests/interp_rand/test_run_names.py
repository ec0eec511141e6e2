"""A run's checkpoint layout has one owner (:mod:`interp_rand.run_names`): the folder training
writes a checkpoint to is the one that :func:`run_of` and :func:`run_label` read back."""

from pathlib import Path

from interp_rand.run_names import run_label, run_of
from interp_rand.training.checkpoint import step_dir


def test_a_checkpoint_folder_is_read_back_as_its_run():
    run = Path("/tmp/runs/recall-seed0")
    checkpoint = step_dir(run, 5)
    assert run_of(checkpoint) == run and run_of(str(checkpoint)) == run
    assert run_label(checkpoint) == "recall-seed0@step_0000005"


def test_a_folder_outside_a_run_is_named_by_itself():
    copied = Path("/tmp/copies/step_0000005")
    assert run_of(copied) is None and run_label(copied) == "step_0000005"
    assert run_of(Path("/tmp/runs/recall-seed0")) is None and run_label("/tmp/runs/recall-seed0") == "recall-seed0"
    assert run_label("zoo:sort") == "zoo:sort"
