"""The ``haiku-recall`` importer against a float64 numpy forward of the port's model, on a
small checkpoint this test writes in the port's own pickle format (jax arrays pickled through
``jax._src.array._reconstruct_array``; JAX itself is not needed)."""

import hashlib
import json
import pickle

import numpy as np
import pytest
import torch

from interp_rand.importers import IMPORTERS, import_model
from interp_rand.importers import haiku_recall as port
from interp_rand.importers.jax_prng import port_fixed_seed, prng_key, split, threefry2x32
from interp_rand.training.checkpoint import load_checkpoint
from port_checkpoints import D, E, N, S, V, port_config, port_params, write_port_checkpoint  # noqa: F401

@pytest.fixture(scope="module")
def fixture_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("port") / f"associative_recall_test_random_q100_c{N}.npy"
    write_port_checkpoint(path, port_config(), port_params())
    assert b"jax._src.array" in path.read_bytes()  # the port's format, not plain numpy
    return path


def _logits_and_reference(run, path, n=64):
    ckpt = load_checkpoint(run)
    task = ckpt.spec.make_task()
    batch = task.sample(n, torch.Generator().manual_seed(0))
    with torch.no_grad():
        ours = ckpt.model()(batch.inputs, batch.seeds).double().numpy()
    config, params = port.read_port_checkpoint(path)
    reference = port.numpy_forward(config, params, port.port_tokens(batch.inputs.numpy(), batch.seeds.numpy(), N))
    return ckpt, ours, reference


def test_import_matches_the_numpy_forward_to_the_rounding_floor(fixture_file, tmp_path):
    folder = import_model("haiku-recall", str(fixture_file), tmp_path / "run")
    ckpt, ours, reference = _logits_and_reference(tmp_path / "run", fixture_file)
    scale = max(1.0, np.abs(reference).max())
    assert np.abs(ours - reference).max() <= 2e-6 * scale  # float32 against float64
    cfg = ckpt.spec.model_config
    assert (cfg.input_mlp_act, cfg.d_model, cfg.d_head, cfg.attention) == ("gelu_new", D, E, "linear")
    assert ckpt.spec.task_config["key_order"] == "identity"
    assert ckpt.spec.train_config.q == 100 and ckpt.spec.train_config.m_seeds == 30
    meta = json.loads((folder / "checkpoint.json").read_text())
    assert meta["provenance"]["source_sha256"] == hashlib.sha256(fixture_file.read_bytes()).hexdigest()
    assert meta["provenance"]["importer"] == "haiku-recall" and not (folder / "trainer.safetensors").exists()
    # the convention is config, so it survives a save, a load and a random re-initialisation
    from probes.controls import random_init_like

    assert random_init_like(ckpt.model()).cfg.input_mlp_act == "gelu_new"
    # control: the erf GELU (the default) misses the port's forward by far more than the floor
    erf = ckpt.model()
    erf.input_mlp.act = torch.nn.functional.gelu
    batch = ckpt.spec.make_task().sample(64, torch.Generator().manual_seed(0))
    with torch.no_grad():
        off = np.abs(erf(batch.inputs, batch.seeds).double().numpy() - reference).max()
    assert off > 20 * np.abs(ours - reference).max()


def test_deterministic_variant_stores_the_ports_r0(tmp_path):
    path = tmp_path / "associative_recall_x_deterministic_q1_c4.npy"
    write_port_checkpoint(path, port_config("deterministic", p=1, seed=7), port_params(1))
    folder = import_model("haiku-recall", str(path), tmp_path / "run")
    ckpt = load_checkpoint(tmp_path / "run")
    bits = port_fixed_seed(7, S)
    assert ckpt.spec.make_task().fixed_seed().tolist() == bits.astype(float).tolist()
    assert json.loads((folder / "checkpoint.json").read_text())["r0"] == bits.astype(float).tolist()
    assert (ckpt.spec.train_config.seed_source, ckpt.spec.train_config.objective) == ("fixed", "erm")
    import_model("haiku-recall", str(path), tmp_path / "unknown", r0="unknown")
    from interp_rand.reports.evaluation import evaluation_report

    with pytest.raises(ValueError, match="r0 that is not known.*never run at another seed"):
        evaluation_report(tmp_path / "unknown", n=16, seeds=4)


def test_unpickler_refuses_anything_but_arrays(tmp_path):
    class Evil:
        def __reduce__(self):  # eval, not print: Ray's tqdm_ray replaces builtins.print once a Ray test has run
            return (eval, ("print('ran code')",))

    path = tmp_path / "evil.npy"
    np.save(path, np.array([{"a": 1}, {"m": {"w": Evil()}}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="refusing to load builtins.eval"):
        port.read_port_checkpoint(path)
    config = port_config()
    config["layer_norm"] = True
    with pytest.raises(ValueError, match="layer_norm=True is not supported"):
        port.check_config(config)
    assert "haiku-recall" in IMPORTERS and "bridge" in IMPORTERS


def test_damaged_headers_huge_arrays_and_wrong_config_types_are_one_line(tmp_path):
    """A header dict that does not parse, an array declaring 10^12 elements and a config whose
    seed is a list: each a ValueError naming the file or the key, never a traceback from numpy,
    tokenize or the allocator."""
    good = tmp_path / "good.npy"
    write_port_checkpoint(good, port_config(), port_params())
    data = good.read_bytes()
    broken = tmp_path / "header.npy"
    broken.write_bytes(data[:10] + b"{'descr': '|O', 'fortran_order': False, 'shape': (2," + data[60:])
    with pytest.raises(ValueError, match="is not a port checkpoint"):
        port.read_port_checkpoint(broken)
    huge = tmp_path / "huge.npy"
    state = list(np.zeros(3, np.float32).__reduce__()[2])
    state[1] = (10 ** 12,)  # the pickled array declares 10^12 elements

    class Huge:
        def __reduce__(self):
            return np.zeros(3, np.float32).__reduce__()[:2] + (tuple(state),)

    np.save(huge, np.array([{"a": 1}, {"m": {"w": Huge()}}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="huge.npy"):
        port.read_port_checkpoint(huge)
    for key, value in (("seed", [1, 2]), ("seed_size", 10 ** 9), ("num_token", True)):
        config = port_config()
        config[key] = value
        with pytest.raises(ValueError, match=f"port config {key}="):
            port.check_config(config)


def test_jax_prng_known_answers():
    # the Threefry-2x32 known-answer vector (Salmon et al. 2011, 20 rounds)
    out = threefry2x32(np.array([0x13198A2E, 0x03707344], np.uint32), np.array([0x243F6A88], np.uint32),
                       np.array([0x85A308D3], np.uint32))
    assert (int(out[0][0]), int(out[1][0])) == (0xC4923A9C, 0x483DF7A0)
    # jax 0.4's jax.random.split(jax.random.PRNGKey(0))
    assert split(prng_key(0), partitionable=False).tolist() == [[4146024105, 967050713], [2718843009, 1272950319]]
