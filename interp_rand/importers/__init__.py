"""Models trained elsewhere, brought in as run folders every command reads: one
:class:`~interp_rand.registry.Registry` of importers, ``interp-rand import KIND SOURCE --out RUN``.

    >>> import_model("haiku-recall", "checkpoints/associative_recall_075xew01_random_q100_c12.npy", "runs/port-c12")
    >>> import_model("bridge", "mypkg.models:trained_bridge", "runs/mine", task="sort", task_config='{"length": 6}')

An importer ``fn(source, **options) -> Imported`` reads ``source`` and returns the run spec
(task, model config, the recipe as a ``TrainConfig``), the model and its provenance;
:func:`import_model` writes them (:mod:`interp_rand.importers.run`). Registered:

- ``haiku-recall``: the paper's public JAX/Haiku port's recall checkpoints
  (:mod:`~interp_rand.importers.haiku_recall`; the only unpickling in the toolkit, restricted
  to numpy arrays, of a file the user names);
- ``bridge``: a TransformerLens ``TransformerBridge`` (``boot_native``) returned by
  ``module:function``, for a registered task (``task=``); a model of a task the toolkit does not
  ship is used directly, ``--model module:function`` on the commands;
- ``hf``: a GPT-2-style Hugging Face checkpoint folder on disk (:mod:`~interp_rand.importers.hf_gpt2`),
  for a registered task.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_rand.registry import Option, Registry


@dataclass(frozen=True)
class Imported:
    """What an importer read: ``spec`` (a :class:`~interp_rand.training.checkpoint.RunSpec`),
    ``model`` and ``provenance`` (JSON-ready: importer, source, the source file's sha256 ...)."""

    spec: Any
    model: Any
    provenance: dict[str, Any]


IMPORTERS: Registry[Callable[..., Imported]] = Registry("importer", sort=True)


def _spec(task_name: str, task_config: dict[str, Any], model_config, train: dict[str, Any]):
    from interp_rand.tasks import make_task
    from interp_rand.training import TrainConfig
    from interp_rand.training.checkpoint import RunSpec

    task = make_task(task_name, **task_config)  # validates the options
    return RunSpec(task.name, task.config_dict(), model_config, TrainConfig(**train))


@IMPORTERS.add("haiku-recall", description="the paper's public JAX/Haiku port: a recall checkpoint "
               "associative_recall_<id>_<variant>_q<q>_c<N>.npy", options=(
                   Option("r0", "str", "", "the fixed seed's bits for a deterministic model ('': recomputed "
                          "from the port's seed with JAX's PRNG; 'unknown': refuse evaluating it)"),))
def import_haiku_recall(source: str, r0: str = "") -> Imported:
    import torch

    from interp_rand.importers import haiku_recall as port
    from interp_rand.importers.run import provenance
    from interp_rand.model.transformer import HookedTransformer
    from interp_rand.tasks import make_task

    config, params = port.read_port_checkpoint(source)
    port.check_config(config, source)
    port.check_params(config, params, source)
    task_config = port.task_config(config)
    if r0:
        task_config["r0"] = r0
    task = make_task("recall", **task_config)
    model_config = task.model_config(**port.model_overrides(config))
    model = HookedTransformer(model_config)
    state = model.state_dict()
    mapped = port.state_dict(config, params)
    for key, value in mapped.items():
        if key not in state or tuple(state[key].shape) != value.shape:
            raise ValueError(f"haiku-recall: {source}: {key} {value.shape} does not fit the recall model "
                             f"({tuple(state[key].shape) if key in state else 'no such parameter'})")
        state[key] = torch.from_numpy(value.astype("float32"))
    unset = sorted(name for name, _ in model.named_parameters() if name not in mapped)
    if unset:
        raise ValueError(f"haiku-recall: {source} leaves parameters {unset} unset")
    model.load_state_dict(state)
    n_params = sum(v.size for leaves in params.values() for v in leaves.values())
    origin = provenance("haiku-recall", Path(source).resolve(), source, port_variant=config["probabilistic"],
                        port_q=config.get("p"), port_seed=config.get("seed"), port_parameters=int(n_params),
                        r0_from="given" if r0 else ("jax PRNGKey(seed)" if config["probabilistic"] == "deterministic"
                                                    else "not used (fresh seeds)"))
    return Imported(_spec("recall", task_config, model_config, port.train_config(config)), model.eval(), origin)


TASK_OPTIONS = (Option("task", "str", "", "the registered task the model solves"),
                Option("task_config", "str", "{}", "the task's options as JSON"))


def _with_task(kind: str, model: Any, task: str, task_config: str, origin: dict[str, Any]) -> Imported:
    """A model of a registered task (``task``, its options ``task_config`` as JSON) as a run,
    after checking that the model fits the task (vocabulary, context)."""
    from interp_rand.evaluation import check_model_fits_task
    from interp_rand.tasks import make_task, task_names

    if task not in task_names():
        raise ValueError(f"{kind}: a run folder needs a registered task (--task, one of {', '.join(task_names())}); "
                         "a model of another task is used directly: --model module:function")
    try:
        options = json.loads(task_config)
    except json.JSONDecodeError as err:
        raise ValueError(f"{kind}: --task-config must be JSON, got {task_config!r}: {err}") from None
    if not isinstance(options, dict):
        raise ValueError(f"{kind}: --task-config must be a JSON object of the task's options, got {task_config!r}")
    try:
        check_model_fits_task(model, make_task(task, **options))
    except (ValueError, TypeError) as err:
        raise ValueError(f"{kind}: {err}") from None
    return Imported(_spec(task, options, model.cfg, {"steps": 1}), model, origin)


@IMPORTERS.add("bridge", description="a TransformerLens TransformerBridge (boot_native) returned by module:function",
               options=TASK_OPTIONS)
def import_bridge(source: str, task: str = "", task_config: str = "{}") -> Imported:
    from interp_rand.importers.run import provenance
    from interp_rand.model.bridge import from_bridge
    from interp_rand.tasks import task_names

    if task not in task_names():  # refused before the user's code runs
        raise ValueError(f"bridge: a run folder needs a registered task (--task, one of {', '.join(task_names())}); "
                         "a model of another task is used directly: --model module:function")
    bridge = load_object(source)
    if type(bridge).__name__ != "TransformerBridge":
        raise ValueError(f"bridge: {source} must return a TransformerBridge, got {type(bridge).__name__}")
    model = from_bridge(bridge)
    return _with_task("bridge", model, task, task_config,
                      provenance("bridge", source, None, bridge_class=type(bridge).__name__))


@IMPORTERS.add("hf", description="a GPT-2-style Hugging Face checkpoint folder already on disk (config.json + "
               "model.safetensors), read offline and checked against TransformerLens's bridge", options=TASK_OPTIONS)
def import_hf(source: str, task: str = "", task_config: str = "{}") -> Imported:
    from interp_rand.importers.hf_gpt2 import read_gpt2
    from interp_rand.importers.run import provenance

    folder = Path(source)
    if not folder.is_dir():
        raise ValueError(f"hf: {source} is not a folder (a Hugging Face model folder: config.json + model.safetensors)")
    weights = folder / "model.safetensors"
    model = read_gpt2(folder)
    return _with_task("hf", model, task, task_config,
                      provenance("hf", str(folder.resolve()), weights if weights.is_file() else None))


def load_object(target: str) -> Any:
    """Call ``module:function`` or ``path/to/file.py:function`` (the user's code, named by the
    user) and return its result."""
    import importlib
    import os
    import sys

    module_name, sep, function = target.rpartition(":")
    if not sep or not module_name or not function.isidentifier():
        raise ValueError(f"{target!r} must be module:function or path/to/file.py:function (e.g. mypkg.models:build)")
    if module_name.endswith(".py"):  # a Python file the user names (a TaskSpec and its model, say)
        import importlib.util

        path = Path(module_name)
        if not path.is_file():
            raise ValueError(f"{target!r}: no file {module_name}")
        spec = importlib.util.spec_from_file_location(f"interp_rand_user_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except SystemExit as err:
            raise ValueError(f"{module_name} called sys.exit({err.code!r}) while loading") from None
        except Exception as err:  # the user's file: say which one failed, and how
            raise ValueError(f"{module_name} failed while loading: {type(err).__name__}: {err}") from None
    else:
        if os.getcwd() not in sys.path:  # a module of the folder the command runs in, as `python -m` finds it
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            raise ValueError(f"cannot import {module_name!r} (from {target!r}): {err}") from None
        except SystemExit as err:  # the user's module ran sys.exit on import
            raise ValueError(f"importing {module_name!r} (from {target!r}) called sys.exit({err.code!r})") from None
        except Exception as err:  # a relative name ('..'), or the user's module failing while it is imported
            raise ValueError(f"cannot import {module_name!r} (from {target!r}): {type(err).__name__}: {err}") from None
    fn = getattr(module, function, None)
    if not callable(fn):
        raise ValueError(f"{module_name} has no function {function!r}")
    return call_user(target, fn)


def call_user(target: str, fn: Any) -> Any:
    """``fn()``, the user's function named ``target``: whatever goes wrong inside it is one
    ``ValueError`` naming it (an exception, endless recursion, ``sys.exit``, a ``breakpoint()``
    that would wait for a debugger), never a traceback or a silent exit."""
    import sys

    def no_debugger(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("it called breakpoint(), which would wait for a debugger")

    hook, sys.breakpointhook = sys.breakpointhook, no_debugger
    try:
        return fn()
    except SystemExit as err:
        raise ValueError(f"{target} called sys.exit({err.code!r}) instead of returning") from None
    except RecursionError:
        raise ValueError(f"{target} recursed without end (RecursionError)") from None
    except Exception as err:  # the user's code: say which function failed, and how
        raise ValueError(f"{target} raised {type(err).__name__}: {err}") from None
    finally:
        sys.breakpointhook = hook


def user_model(target: str) -> tuple[Any, Any, str]:
    """``(model, task, seed_source)`` of ``module:function``, which returns ``(model, task)`` or
    ``(model, task, seed_source)``: our model or a TransformerBridge (converted,
    :func:`~interp_rand.model.bridge.from_bridge`), a task or a
    :class:`~interp_rand.tasks.spec.TaskSpec`, ``"fresh"`` (default) or ``"fixed"`` (trained
    on the task's r0 alone)."""
    from interp_rand.model.transformer import HookedTransformer

    got = load_object(target)
    if not isinstance(got, tuple) or len(got) not in (2, 3):
        raise ValueError(f"{target} must return (model, task) or (model, task, seed_source); got {type(got).__name__}")
    model, task, seed_source = (*got, "fresh") if len(got) == 2 else got
    if type(model).__name__ == "TransformerBridge":
        from interp_rand.model.bridge import from_bridge

        model = from_bridge(model)
    if not isinstance(model, HookedTransformer):
        raise ValueError(f"{target}: the model must be an interp_rand HookedTransformer or a TransformerBridge, "
                         f"got {type(model).__name__}")
    if task is None or not hasattr(task, "sample"):
        raise ValueError(f"{target}: the task must be a task or an interp_rand.tasks.TaskSpec, got {task!r}")
    if seed_source not in ("fresh", "fixed"):
        raise ValueError(f"{target}: seed_source must be 'fresh' or 'fixed', got {seed_source!r}")
    return model.eval(), task, seed_source


def import_model(kind: str, source: str, out: str | Path, **options: Any) -> Path:
    """Import ``source`` with the importer ``kind`` into the new weights-only run ``out``;
    returns the checkpoint folder written."""
    from interp_rand.importers.run import write_run

    entry = IMPORTERS.entry(kind)
    unknown = sorted(set(options) - {o.name for o in entry.options})
    if unknown:
        raise ValueError(f"importer {kind!r} has no option(s) {unknown}; its options: "
                         f"{', '.join(o.name for o in entry.options) or '(none)'}")
    imported = entry.value(source, **options)
    return write_run(out, imported.spec, imported.model, imported.provenance)


__all__ = ["IMPORTERS", "Imported", "call_user", "import_model", "load_object", "user_model"]
