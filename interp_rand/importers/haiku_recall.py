"""The paper's public JAX/Haiku port (``emherk/randomized-algos-transformers``): its recall
checkpoints ``associative_recall_<id>_<variant>_q<q>_c<N>.npy``, a pickled numpy object array
``(config, params)``, as a model of :class:`~interp_rand.tasks.recall.RecallTask`.

**Unpickling.** These files are pickles, and unpickling can run code. They are read only here,
only from a path the user names, and by a restricted unpickler that builds numpy arrays and
nothing else (``numpy.ndarray``/``dtype``/``_reconstruct`` and JAX's array reconstructor,
mapped to numpy, so JAX need not be installed); any other global is refused. The rest of the
toolkit unpickles nothing (safetensors and JSON only).

**Mapping** (the port's ``model_rng.CustomTransformer`` with ``first_mlp=True``, no block MLPs,
no LayerNorm, no positional embedding, linear attention). Its token is
``[one_hot(key) (N), seed (S), value (V)]``, so the first ``hk.Linear`` (``linear``, ``w:
[N+S+V, 40]``) splits by rows into ``W_E`` (rows ``0..N-1`` and ``N+S..``) and ``W_seed`` (rows
``N..N+S-1``), its bias is the input MLP's ``b_in``; ``linear_1`` is the input MLP's
``W_out``/``b_out`` after ``jax.nn.gelu`` (tanh approximation: ``input_mlp_act="gelu_new"``);
attention ``i`` (``custom_multi_head_attention[_i]``: ``w_q, w_k, w_v [H, 40, 5]``, ``w_o [H,
5, 40]``) is block ``i``'s ``W_Q/W_K/W_V/W_O`` as they are; ``linear_2`` is ``W_U``/``b_U``.
The port's keys sit in order (key ``i`` at position ``i``): ``key_order="identity"``.

**Variants** (the port's ``probabilistic``, with ``p`` the q-norm's exponent): ``random`` is
``m = num_seed`` fresh seeds per step (``A^q_R`` at ``p > 1``, ``A^E_R`` at ``p = 1``),
``single_seed`` one fresh seed per step (``A^q_R (m=1)``), ``deterministic`` the fixed seed of
``PRNGKey(seed)`` (``A^E_r0`` at ``p = 1``, ``A^q_r0`` otherwise), recomputed here with
:mod:`~interp_rand.importers.jax_prng` and stored as the task's ``r0``.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np

from interp_rand.importers.jax_prng import port_fixed_seed
from interp_rand.model.hook_names import hook_name

# What the mapping above assumes of the port's config: (key, required value).
_REQUIRED = (("first_mlp", True), ("mlp", False), ("positional_embedding", False), ("softmax", "none"),
             ("hardcoded_randomness", False), ("loss", "bce"), ("last_mlp", False), ("layer_norm", False))
VARIANTS = ("random", "single_seed", "deterministic")


def _reconstruct_jax_array(fun, args, arr_state, aval_state):
    """``jax._src.array._reconstruct_array`` without JAX: the numpy array it wraps."""
    array = fun(*args)
    array.__setstate__(arr_state)
    return array


class _ArraysOnly(pickle.Unpickler):
    """Builds numpy arrays, dicts, lists, tuples and scalars; refuses every other global."""

    _ALLOWED = {("numpy._core.multiarray", "_reconstruct"): np._core.multiarray._reconstruct,
                ("numpy.core.multiarray", "_reconstruct"): np._core.multiarray._reconstruct,
                ("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype,
                ("jax._src.array", "_reconstruct_array"): _reconstruct_jax_array}

    def find_class(self, module: str, name: str):
        if (module, name) in self._ALLOWED:
            return self._ALLOWED[(module, name)]
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: a port checkpoint holds numpy arrays only")


def read_port_checkpoint(path: str | Path) -> tuple[dict[str, Any], dict[str, dict[str, np.ndarray]]]:
    """``(config, params)`` of a port checkpoint (restricted unpickling, see the module doc)."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            version = np.lib.format.read_magic(handle)
            header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            header(handle)
            data = _ArraysOnly(handle).load()
    except FileNotFoundError:
        raise ValueError(f"{path} does not exist") from None
    except MemoryError:  # an array declaring more elements than memory holds (numpy refuses it)
        raise ValueError(f"{path} declares an array too large to hold in memory: not a port checkpoint") from None
    except Exception as err:  # a damaged header or pickle, in whatever way numpy or pickle reports it
        raise ValueError(f"{path} is not a port checkpoint (a .npy holding (config, params)): "
                         f"{type(err).__name__}: {err}") from None
    if not (isinstance(data, np.ndarray) and data.shape == (2,) and isinstance(data[0], dict)
            and isinstance(data[1], dict)):
        raise ValueError(f"{path} is not a port checkpoint: expected a (config, params) pair")
    config, params = data[0], data[1]
    if not all(isinstance(leaves, dict) for leaves in params.values()):
        raise ValueError(f"{path} is not a port checkpoint: its parameters must be module -> leaf -> array")
    params = {module: {k: v if isinstance(v, np.ndarray) else np.asarray(v, dtype=object) for k, v in leaves.items()}
              for module, leaves in params.items()}
    return config, params


# the port config's integer fields the import reads, with the largest value it accepts
_INTEGERS = {"num_token": 64, "target_size": 32, "seed_size": 32, "seed": 2**63 - 1, "num_steps": 10**9,
             "batch_size": 10**7, "num_seed": 10**6}
# the model's sizes: required, at least 1, at most this (the port's models are 40 wide, 2 layers)
_SIZES = {"embed_dim": 4096, "num_layers": 64, "num_heads": 64, "kq_dim": 4096}
# the training recipe's numbers (GD_PARAM's, and the q-norm's p), each a finite number
_GD_NUMBERS = ("lr", "eps", "grad_norm_clip", "weight_decay", "lr_alpha", "warmup_steps")


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
            and bool(np.isfinite(value)))


def check_config(config: dict[str, Any], source: str | Path = "") -> None:
    """Refuse a port config the mapping does not cover or whose fields are not what the port
    writes: one line naming the file (``source``) and the offending key."""
    where = f"haiku-recall: {source}: " if source else "haiku-recall: "
    for key, largest in _INTEGERS.items():
        value = config.get(key, 0)
        if not _is_int(value) or not 0 <= value <= largest:
            raise ValueError(f"{where}port config {key}={value!r} must be an integer in 0..{largest}")
    for key, largest in _SIZES.items():
        if key not in config:
            raise ValueError(f"{where}port config has no {key!r} (the model's size)")
        if not _is_int(config[key]) or not 1 <= config[key] <= largest:
            raise ValueError(f"{where}port config {key}={config[key]!r} must be an integer in 1..{largest}")
    for key, value in _REQUIRED:
        if key in config and config[key] != value:
            raise ValueError(f"{where}port config {key}={config[key]!r} is not supported (needs {value!r})")
    if config.get("probabilistic") not in VARIANTS:
        raise ValueError(f"{where}port config probabilistic={config.get('probabilistic')!r} is not one of {VARIANTS}")
    if not _is_number(config.get("p", 1)):
        raise ValueError(f"{where}port config p={config.get('p')!r} must be a finite number (the q-norm's exponent)")
    gd = config.get("GD_PARAM", {})
    if not isinstance(gd, dict):
        raise ValueError(f"{where}port config GD_PARAM={gd!r} must be a dict of the optimiser's settings")
    for key in _GD_NUMBERS:
        if key in gd and not _is_number(gd[key]):
            raise ValueError(f"{where}port config GD_PARAM.{key}={gd[key]!r} must be a finite number")
    betas = gd.get("betas", (0.9, 0.95))
    if not (isinstance(betas, (tuple, list)) and len(betas) == 2 and all(_is_number(b) for b in betas)):
        raise ValueError(f"{where}port config GD_PARAM.betas={betas!r} must be two finite numbers")


def expected_shapes(config: dict[str, Any]) -> dict[str, dict[str, tuple[int, ...]]]:
    """The port's parameter shapes for ``config`` (module docstring): module -> leaf -> shape."""
    N, S, V = int(config["num_token"]), int(config["seed_size"]), int(config["target_size"])
    D, H, E = int(config["embed_dim"]), int(config["num_heads"]), int(config["kq_dim"])
    root = "custom_transformer"
    shapes = {f"{root}/linear": {"w": (N + S + V, D), "b": (D,)}, f"{root}/linear_1": {"w": (D, D), "b": (D,)},
              f"{root}/linear_2": {"w": (D, V), "b": (V,)}}
    for i in range(int(config["num_layers"])):
        name = f"{root}/custom_multi_head_attention" + (f"_{i}" if i else "")
        shapes[name] = {"w_q": (H, D, E), "w_k": (H, D, E), "w_v": (H, D, E), "w_o": (H, E, D)}
    return shapes


def check_params(config: dict[str, Any], params: dict[str, Any], source: str | Path = "") -> None:
    """Refuse parameters that are not the port's for ``config``: a module or leaf missing, one
    that is not a float array, or of another shape (one line naming the file and the leaf)."""
    where = f"haiku-recall: {source}: " if source else "haiku-recall: "
    roots = {str(m).split("/")[0] for m in params}
    if roots != {"custom_transformer"}:
        raise ValueError(f"{where}the parameters' modules {sorted(map(str, params))[:4]} are not the port's "
                         "custom_transformer/...")
    for module, leaves in expected_shapes(config).items():
        if module not in params:
            raise ValueError(f"{where}the parameters have no module {module!r} (the config's num_layers="
                             f"{config['num_layers']} needs it)")
        for leaf, shape in leaves.items():
            value = params[module].get(leaf)
            if value is None:
                raise ValueError(f"{where}the parameters have no {module}/{leaf}")
            if not (isinstance(value, np.ndarray) and value.dtype.kind == "f"):
                raise ValueError(f"{where}{module}/{leaf} must be a float array, got "
                                 f"{getattr(value, 'dtype', type(value).__name__)}")
            if tuple(value.shape) != shape:
                raise ValueError(f"{where}{module}/{leaf} has shape {tuple(value.shape)}, the config needs {shape}")


def _attention_modules(params: dict) -> list[str]:
    """The attention modules in layer order (Haiku names them ``..._attention``, ``..._attention_1`` ...)."""
    def layer(module: str) -> int:
        suffix = module.rsplit("_", 1)[-1]
        return int(suffix) if suffix.isdigit() else 0

    return sorted((m for m in params if m.split("/")[-1].startswith("custom_multi_head_attention")), key=layer)


def port_r0(config: dict[str, Any]) -> str:
    """The task's ``r0`` for the port's variant: the deterministic seed's bits, else the toolkit's."""
    if config["probabilistic"] != "deterministic":
        return "toolkit"  # never used: the model was trained on fresh seeds
    return "".join(str(int(b)) for b in port_fixed_seed(int(config["seed"]), int(config["seed_size"])))


def task_config(config: dict[str, Any]) -> dict[str, Any]:
    """The :class:`~interp_rand.tasks.recall.RecallTask` options of the port's config."""
    return {"n_pairs": int(config["num_token"]), "value_bits": int(config["target_size"]),
            "seed_bits": int(config["seed_size"]), "key_order": "identity", "r0": port_r0(config)}


def train_config(config: dict[str, Any]) -> dict[str, Any]:
    """The port's training recipe in :class:`~interp_rand.training.TrainConfig` terms (what was
    done, for the record; a weights-only import is never resumed)."""
    gd, variant, q = config.get("GD_PARAM", {}), config["probabilistic"], float(config.get("p", 1))
    fixed = variant == "deterministic"
    return {"steps": int(config.get("num_steps", 1)), "batch_size": int(config.get("batch_size", 1)),
            "lr": float(gd.get("lr", 1e-3)), "warmup_steps": int(gd.get("warmup_steps", 0)),
            "min_lr_ratio": float(gd.get("lr_alpha", 0.1)), "weight_decay": float(gd.get("weight_decay", 0.0)),
            "beta1": float(gd.get("betas", (0.9, 0.95))[0]), "beta2": float(gd.get("betas", (0.9, 0.95))[1]),
            "adam_eps": float(gd.get("eps", 1e-5)), "grad_clip": float(gd.get("grad_norm_clip", 1.0)),
            "seed": int(config.get("seed", 0)), "objective": "erm" if fixed and q == 1 else "qnorm", "q": q,
            "m_seeds": int(config.get("num_seed", 1)) if variant == "random" else 1,
            "seed_source": "fixed" if fixed else "fresh"}


def state_dict(config: dict[str, Any], params: dict[str, dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Our parameter names -> the port's arrays (see the module doc for the mapping)."""
    N, S = int(config["num_token"]), int(config["seed_size"])
    root = next(iter(params)).split("/")[0]
    first, second, out = params[f"{root}/linear"], params[f"{root}/linear_1"], params[f"{root}/linear_2"]
    w = first["w"]
    state = {"embed.W_E": np.concatenate([w[:N], w[N + S:]]), "seed_embed.W_seed": w[N:N + S],
             "input_mlp.b_in": first["b"], "input_mlp.W_out": second["w"], "input_mlp.b_out": second["b"],
             "unembed.W_U": out["w"], "unembed.b_U": out["b"]}
    for layer, module in enumerate(_attention_modules(params)):
        for ours, theirs in (("W_Q", "w_q"), ("W_K", "w_k"), ("W_V", "w_v"), ("W_O", "w_o")):
            state[hook_name(layer, f"attn.{ours}")] = params[module][theirs]
    return state


def model_overrides(config: dict[str, Any]) -> dict[str, Any]:
    """``RecallTask.model_config`` overrides for the port's sizes and its GELU."""
    return {"d_model": int(config["embed_dim"]), "n_layers": int(config["num_layers"]),
            "n_heads": int(config["num_heads"]), "d_head": int(config["kq_dim"]), "input_mlp_act": "gelu_new"}


def numpy_forward(config: dict[str, Any], params: dict[str, dict[str, np.ndarray]], tokens: np.ndarray) -> np.ndarray:
    """The port's ``CustomTransformer`` (this configuration) in float64 numpy, written from its
    code: ``tokens [batch, T, N+S+V]`` (the port's layout) to logits ``[batch, T, V]``."""
    root = next(iter(params)).split("/")[0]
    p = {m: {k: v.astype(np.float64) for k, v in leaves.items()} for m, leaves in params.items()}
    x = tokens.astype(np.float64)
    h = x @ p[f"{root}/linear"]["w"] + p[f"{root}/linear"]["b"]
    gelu = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))  # jax.nn.gelu (approximate)
    h = gelu @ p[f"{root}/linear_1"]["w"] + p[f"{root}/linear_1"]["b"]
    T = h.shape[1]
    mask = np.tril(np.ones((T, T)))
    for module in _attention_modules(params):
        a = p[module]
        w_qk = np.einsum("HIO,HiO->HIi", a["w_q"], a["w_k"])
        w_vo = np.einsum("HIO,HOi->HIi", a["w_v"], a["w_o"])
        attention = np.einsum("HIi,bTI,bti->bHTt", w_qk, h, h, optimize=True) * mask  # softmax "none": masked, unscaled
        values = np.einsum("HIi,btI->bHti", w_vo, h, optimize=True)
        h = h + np.einsum("bHTt,bHtI->bTI", attention, values, optimize=True)
    return h @ p[f"{root}/linear_2"]["w"] + p[f"{root}/linear_2"]["b"]


def port_tokens(inputs: np.ndarray, seeds: np.ndarray, n_pairs: int) -> np.ndarray:
    """Our recall inputs ``[batch, N+1, N+V]`` and seeds ``[batch, S]`` as the port's tokens
    ``[batch, N+1, N+S+V]`` (the seed after the key one-hot, at every position)."""
    batch, T, _ = inputs.shape
    seed = np.broadcast_to(seeds[:, None, :], (batch, T, seeds.shape[-1]))
    return np.concatenate([inputs[..., :n_pairs], seed, inputs[..., n_pairs:]], axis=-1)


__all__ = ["VARIANTS", "check_config", "check_params", "expected_shapes", "model_overrides", "numpy_forward", "port_r0", "port_tokens",
           "read_port_checkpoint", "state_dict", "task_config", "train_config"]
