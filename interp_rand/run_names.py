"""How a run is named: its folder, one of its checkpoint folders (``RUN/checkpoints/step_N``), or
``zoo:NAME``, a model of the packaged zoo (its folder under ``interp_rand/zoo/models``).

A foundation of the core (no torch, no other module of the toolkit): the checkpoint loaders
(``interp_rand.training``, the grid world's) read ``zoo:NAME`` through it, so any command or
function that takes a run directory also takes ``zoo:NAME``; :mod:`interp_rand.zoo` builds and
describes the models there. A bad name is a ``ValueError`` saying what a zoo name may be (the
loaders raise it as their ``CheckpointError``).
"""

from __future__ import annotations

import re
from pathlib import Path

ZOO_DIR = Path(__file__).resolve().parent / "zoo" / "models"
PREFIX = "zoo:"
CARD_FILE = "zoo.json"
#: a run's checkpoint folders are ``RUN/checkpoints/step_N``: the one owner of that layout's name
#: (:mod:`interp_rand.training.checkpoint` writes there; :func:`run_of` reads a path back)
CHECKPOINTS_DIR = "checkpoints"
# a zoo model's name: one folder name inside the zoo (never a path out of it)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def installed(root: Path = ZOO_DIR) -> list[str]:
    """Names of the models present under ``root`` (a folder holding a ``zoo.json`` card)."""
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / CARD_FILE).is_file())


def zoo_name(path: str | Path) -> str | None:
    """``NAME`` if ``path`` is ``"zoo:NAME"``, else ``None``; ``ValueError`` for a name that is
    not one folder name (``zoo:../../x``): zoo names are confined to the zoo's folder."""
    text = str(path)
    if not text.startswith(PREFIX):
        return None
    return check_name(text[len(PREFIX):])


def check_name(name: str, root: Path = ZOO_DIR) -> str:
    """``name`` if it is one folder name (letters, digits, ``.``, ``_``, ``-``; no ``..``),
    else ``ValueError``: a zoo name never leads out of the zoo's folder."""
    if not _NAME.fullmatch(name) or ".." in name:
        raise ValueError(f"zoo:{name}: a zoo name is one model's folder name in the zoo (letters, digits, '.', '_', "
                         f"'-'; no '..' or '/'), e.g. zoo:sort; installed: {', '.join(installed(root)) or 'none'}")
    return name


def zoo_path(name: str, root: Path = ZOO_DIR) -> Path:
    """The run directory of the zoo model ``name``; ``ValueError`` naming the models there are
    if it is absent or not a name inside ``root`` (:func:`check_name`)."""
    folder = root / check_name(name, root)
    if not (folder / CARD_FILE).is_file():
        have = installed(root)
        raise ValueError(
            f"no zoo model {name!r} in {root}; installed: {', '.join(have) if have else 'none'}"
            " (build them with `interp-rand zoo build`)"
        )
    return folder


def run_label(run: str | Path) -> str:
    """A run's short name for titles and legends: ``zoo:NAME`` as given, else the folder's name
    (a checkpoint folder ``RUN/checkpoints/step_N`` is named ``RUN@step_N``), never a whole path."""
    if zoo_name(run) is not None:
        return str(run)
    path = Path(run)
    folder = run_of(path)
    if folder is not None:
        return f"{folder.name}@{path.name}"
    return path.name or str(path)


def run_of(checkpoint: str | Path) -> Path | None:
    """The run folder a checkpoint folder ``RUN/checkpoints/step_N`` belongs to (``None`` for a
    folder outside a run, e.g. a copied checkpoint)."""
    path = Path(checkpoint)
    return path.parent.parent if path.parent.name == CHECKPOINTS_DIR else None


def output_folder(run: str | Path, run_dir: str | Path, given: str | Path | None = None) -> Path:
    """Where results about ``run`` are written: ``given`` if set; for a zoo model (``zoo:NAME``:
    package data, never written into) ``zoo-output/NAME``; else ``run_dir``."""
    if given is not None:
        return Path(given)
    name = zoo_name(run)
    return Path("zoo-output") / name if name is not None else Path(run_dir)


def resolve_run(path: str | Path) -> Path:
    """``path`` as a folder: ``"zoo:NAME"`` becomes the zoo model's run directory (``ValueError``
    for a name that is not an installed zoo model, :func:`zoo_path`)."""
    name = zoo_name(path)
    return Path(path) if name is None else zoo_path(name)
