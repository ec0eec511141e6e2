"""A port checkpoint of the paper's public JAX code, written without JAX: its config and
parameters at tiny sizes, saved as the port saves them (``np.save`` of ``(cfg, params)``, the
arrays pickled as ``jax._src.array._reconstruct_array`` calls). Shared by the importer's tests and
the import property test."""

import sys
import types

import numpy as np

N, S, V, D, E = 4, 3, 2, 8, 2  # pairs, seed bits, value bits, width, key size


def port_config(variant="random", p=100, seed=42):
    return {"seed": seed, "num_steps": 10, "num_token": N, "target_size": V, "batch_size": 8, "probabilistic": variant,
            "data_pooling": "lp", "p": p, "num_seed": 30, "loss": "bce", "hardcoded_randomness": False, "mlp": False,
            "widening_factor": 1, "first_mlp": True, "seed_size": S, "reverse_block": True, "num_layers": 2,
            "num_heads": 1, "kq_dim": E, "v_dim": E, "embed_dim": D, "softmax": "none", "positional_embedding": False,
            "GD_PARAM": {"lr": 0.003, "betas": (0.9, 0.95), "eps": 1e-05, "grad_norm_clip": 1, "weight_decay": 0.0,
                         "lr_alpha": 0.1, "warmup_steps": 3}}


def port_params(seed=0):
    g = np.random.default_rng(seed)
    w = lambda *shape: g.normal(0, 0.7, shape).astype(np.float32)  # noqa: E731
    root = "custom_transformer"
    params = {f"{root}/linear": {"w": w(N + S + V, D), "b": w(D)}, f"{root}/linear_1": {"w": w(D, D), "b": w(D)},
              f"{root}/linear_2": {"w": w(D, V), "b": w(V)}}
    for name in ("custom_multi_head_attention", "custom_multi_head_attention_1"):
        params[f"{root}/{name}"] = {"w_q": w(1, D, E), "w_k": w(1, D, E), "w_v": w(1, D, E), "w_o": w(1, E, D)}
    return params


class _JaxArray:
    """Pickles as a jax array does: ``jax._src.array._reconstruct_array(fun, args, state, aval)``."""

    def __init__(self, array):
        self.array = array

    def __reduce__(self):
        fun, args, state = self.array.__reduce__()
        return _reconstruct_array, (fun, args, state, {"weak_type": False})


def _reconstruct_array(*args):  # pickled by name as jax._src.array._reconstruct_array
    raise AssertionError("never called")


def write_port_checkpoint(path, config, params):
    """``np.save(path, (cfg, params))`` as the port does, its arrays pickled as jax arrays."""
    fake = types.ModuleType("jax._src.array")
    fake._reconstruct_array = _reconstruct_array
    _reconstruct_array.__module__, _reconstruct_array.__qualname__ = "jax._src.array", "_reconstruct_array"
    wrapped = {m: {k: _JaxArray(v) for k, v in leaves.items()} for m, leaves in params.items()}
    saved = {name: sys.modules.get(name) for name in ("jax", "jax._src", "jax._src.array")}
    sys.modules.update({"jax": types.ModuleType("jax"), "jax._src": types.ModuleType("jax._src"), "jax._src.array": fake})
    try:
        np.save(path, np.array([config, wrapped], dtype=object), allow_pickle=True)
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
