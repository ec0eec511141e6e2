"""An imported model as a weights-only run folder that every command reads:
``RUN/checkpoints/step_XXXXXXX/`` with ``model.safetensors`` and ``checkpoint.json`` (no trainer
state: it is analysed, evaluated or used as ``init_from``, never resumed), whose
``"provenance"`` says where the weights came from (source path, importer, the source file's
sha256) and a ``card.json`` beside it with the same, for a reader of the folder."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import torch

from interp_rand.model.transformer import HookedTransformer
from interp_rand.output.files import write_json
from interp_rand.output.folder import replace_folder
from interp_rand.training.checkpoint import (FORMAT, META_FILE, MODEL_FILE, VERSION, RunSpec, fixed_seed_entry,
                                             forward_check_entry, load_checkpoint, step_dir, weights_metadata,
                                             write_tensors)

CARD_FILE = "card.json"


def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def provenance(kind: str, source: str, file: str | Path | None, **details: Any) -> dict[str, Any]:
    """What an imported model's checkpoint.json and card record about where it came from."""
    out: dict[str, Any] = {"importer": kind, "source": str(source)}
    if file is not None:
        out["source_sha256"] = sha256_of(file)
    return {**out, **details}


def write_run(out: str | Path, spec: RunSpec, model: HookedTransformer, origin: dict[str, Any],
              step: int = 0, metrics: dict[str, Any] | None = None) -> Path:
    """Write ``model`` as the weights-only run ``out`` (refused if ``out`` already holds a run)
    and read it back through :func:`~interp_rand.training.checkpoint.load_checkpoint`, so a
    folder that cannot be loaded is never left behind. Returns the checkpoint folder."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"--out {out} is not empty; import into a new folder")
    state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    damaged = sorted(k for k, v in state.items() if v.is_floating_point() and not bool(torch.isfinite(v).all()))
    if damaged:  # refused before anything is written
        raise ValueError(f"{origin.get('source', 'the import')}: the imported weights hold NaN or infinite values in "
                         f"{damaged}; nothing was written")
    created = not out.exists()
    try:
        final = step_dir(out, step)
        meta = {"format": FORMAT, "version": VERSION, "step": step, **spec.to_dict(), **fixed_seed_entry(spec),
                "metrics": metrics or {}, "provenance": origin, **forward_check_entry(spec, state)}
        with replace_folder(final) as tmp:  # the checkpoint folder appears whole or not at all
            write_tensors(tmp / MODEL_FILE, state, weights_metadata(spec.model_config))
            write_json(tmp / META_FILE, meta)
        write_json(out / CARD_FILE, {"task": spec.task_name, "task_config": spec.task_config, "provenance": origin})
        loaded = load_checkpoint(out).model()
        for key, value in model.state_dict().items():
            if not torch.equal(loaded.state_dict()[key], value.detach().cpu()):
                raise RuntimeError(f"{out}: {key} did not read back as written")
    except BaseException:  # a failed import (full disk, a bad read-back) leaves no folder to refuse a retry
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise
    return final


__all__ = ["CARD_FILE", "provenance", "sha256_of", "write_run"]
