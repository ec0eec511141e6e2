"""Sizes refused before any work when their memory estimate exceeds what the machine has.

A number option whose :class:`~interp_rand.validation.Bounds` say what it ``counts`` is
estimated after parsing (no torch imported), from the dominant tensors, in float32:

- ``examples`` (``--n``, ``--seeds``, ``--batch-size``, ...): the value times one example's
  activations in one forward pass of the model: per position, the residual stream and its
  LayerNorm outputs (8 x d_model), queries, keys, values and head outputs (4 x n_heads x
  d_head), attention scores and pattern (2 x n_heads x n_ctx) and the MLP's hidden layer
  (2 x d_mlp) of every layer, and the logits;
- ``width`` (``--d-model``, ``--n-layers``, ...): the model's parameters with their gradient and
  AdamW's two moments (16 bytes a parameter).

It is a lower bound: the commands hold more (a backward pass, caches of both clean and
corrupted inputs), so a refused size certainly does not fit. The model is the run's (its
``checkpoint.json``), ``train``'s (the task's default model with the options given), or, where
neither is known, the smallest model the estimate allows (width 1, one layer, 2 positions).
Available memory is ``MemAvailable`` of ``/proc/meminfo`` (or the free pages ``sysconf``
reports); where neither is readable nothing is refused.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from interp_rand.cli import catalogue
from interp_rand.host_memory import available_bytes, human
from interp_rand.validation import Bounds

FLOAT_BYTES = 4
# The smallest model: what the estimate assumes when neither a run nor a task says more.
SMALLEST_MODEL = {"d_model": 1, "n_layers": 1, "n_heads": 1, "d_head": 1, "n_ctx": 2, "d_mlp": 0, "attn_only": True,
                  "d_vocab": 1, "d_input": 0, "d_vocab_out": 1, "d_seed": 0, "d_input_mlp": 0}


def _dims(model: dict[str, Any]) -> dict[str, int]:
    m = {**SMALLEST_MODEL, **{k: v for k, v in model.items() if v is not None}}
    if model.get("d_head") is None:
        m["d_head"] = max(1, m["d_model"] // max(1, m["n_heads"]))
    if model.get("d_mlp") is None and "d_model" in model:
        m["d_mlp"] = 4 * m["d_model"]
    if model.get("d_vocab_out") in (None, 0):
        m["d_vocab_out"] = max(1, m["d_vocab"])
    return m


def example_bytes(model: dict[str, Any]) -> int:
    """One example's activations in one forward pass (module docstring), in bytes."""
    m = _dims(model)
    mlp = 0 if m.get("attn_only") else 2 * m["d_mlp"]
    per_layer = 8 * m["d_model"] + 4 * m["n_heads"] * m["d_head"] + 2 * m["n_heads"] * m["n_ctx"] + mlp
    return FLOAT_BYTES * m["n_ctx"] * (m["n_layers"] * per_layer + m["d_vocab_out"])


def training_bytes(model: dict[str, Any]) -> int:
    """The parameters of ``model`` with gradient and AdamW's two moments, in bytes."""
    m = _dims(model)
    attention = 4 * m["d_model"] * m["n_heads"] * m["d_head"]
    mlp = 0 if m.get("attn_only") else 2 * m["d_model"] * m["d_mlp"]
    inputs = m["d_model"] * (m["d_vocab"] + m["d_input"] + m["n_ctx"] + m["d_seed"] + 2 * m["d_input_mlp"])
    params = m["n_layers"] * (attention + mlp) + inputs + m["d_model"] * m["d_vocab_out"]
    return 4 * FLOAT_BYTES * params


def sized_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[tuple[Any, str, int, str]]:
    """``(parser, flag, value, counts)`` of the options parsed into ``args`` whose type declares
    what it counts, in the parser and the sub-command parsers ``args`` chose."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            if chosen is not None:
                found += sized_options(chosen, args)
            continue
        bounds: Bounds | None = getattr(action.type, "bounds", None)
        value = getattr(args, action.dest, None)
        if bounds is None or bounds.counts is None or not action.option_strings or value is None:
            continue
        for one in value if isinstance(value, list) else [value]:
            if isinstance(one, int):
                found.append((parser, action.option_strings[0], one, bounds.counts))
    return found


def model_of(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """The model the command will run (its fields as a dict) and where it was read from."""
    task = getattr(args, "task", None)
    if getattr(args, "model_fields", None) and task in catalogue.task_names():  # train TASK
        given = {name: getattr(args, name) for name in args.model_fields if hasattr(args, name)}
        model = catalogue.task_model_defaults(task)
        if "d_model" in given:  # the derived widths follow it unless given
            model = {**model, "d_head": None, "d_mlp": None}
        return {**model, **given}, f"the {task} model"
    for name in ("run_dir", "run_a", "path"):
        run = getattr(args, name, None)
        if run is not None:
            model = _run_model(run)
            if model is not None:
                return model, f"{run}'s model"
    return dict(SMALLEST_MODEL), "the smallest model"


def _run_model(run: Any) -> dict[str, Any] | None:
    from interp_rand.run_names import resolve_run

    try:
        folder = resolve_run(run)
        meta = folder / "checkpoint.json"
        if not meta.is_file():
            steps = sorted((folder / "checkpoints").glob("step_*/checkpoint.json"))
            meta = steps[-1] if steps else meta
        model = json.loads(meta.read_text(encoding="utf-8"))["model"]
        return model if isinstance(model, dict) and all(
            isinstance(model.get(k), int) for k in ("d_model", "n_layers", "n_ctx")) else None
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None  # the command itself says what is wrong with the run


def check(parser: argparse.ArgumentParser, args: argparse.Namespace, available: int | None = None) -> None:
    """``parser.error`` (one line, exit 2) for the first sized option of ``args`` whose estimate
    exceeds ``available`` bytes (default: :func:`available_bytes`)."""
    sized = sized_options(parser, args)
    if not sized:
        return
    available = available_bytes() if available is None else available
    if available is None:
        return
    model, which = model_of(args)
    # the model's widths first: a model too large to hold is what the message should name
    for owner, flag, value, counts in sorted(sized, key=lambda s: s[3] != "width"):
        if counts == "examples":
            need = value * example_bytes(model)
            how = f"{value:,} examples x {human(example_bytes(model))} of activations each ({which}, float32)"
        else:
            name = flag.lstrip("-").replace("-", "_")
            need = training_bytes({**model, name: value})
            how = f"the parameters of {which} at {flag} {value:,} with gradient and AdamW's state (16 bytes each)"
        if need > available:
            owner.error(f"argument {flag}: {value:,} needs at least {human(need)} of memory ({how}); "
                         f"this machine has {human(available)} available")
