"""Loading checkpoints without running code from them.

vitpos checkpoints hold only tensors and plain containers (the config is saved with
``OmegaConf.to_container``), so every tool loads them with ``weights_only=True`` through
:func:`vitpos.safe_load.load_weights_only` and turns each failure into one :class:`CheckpointError`
that names the file. :func:`find_checkpoints` is the one search behind every tool's ``ckpt=``.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from vitpos.cli.options import expand_paths
from vitpos.errors import CheckpointError, UserError  # CheckpointError: raised here, imported from here by callers
from vitpos.safe_load import NotLoadable, load_weights_only

#: what a run folder is searched for: train.py rewrites it at the end of every epoch
LAST = "last.ckpt"
SEARCH_FIX = "pass a .ckpt file, a runs folder or a glob pattern"


class Found(NamedTuple):
    """A checkpoint ``ckpt=`` named, and the folder it was found in (None: the file was named itself)."""

    path: Path
    root: Path | None


def find_checkpoints(values: list[str], option: str = "ckpt") -> list[Found]:
    """Every checkpoint the ``ckpt=`` values name, in the order given, each once.

    A glob pattern is expanded here (bash leaves patterns inside ``key=value`` alone); a folder gives
    every ``last.ckpt`` below it, sorted; a file is taken as named (:func:`load_checkpoint` checks it).
    A missing path, a pattern matching nothing, or folders without a ``last.ckpt`` raise :class:`UserError`."""
    found: dict[Path, Found] = {}  # by the file it names, the first name kept
    for value in values:
        paths, hits = expand_paths(option, [value]), []
        for p in paths:
            if p.is_dir():
                hits += [Found(c, p) for c in sorted(p.rglob(LAST))]
            elif p.exists():
                hits.append(Found(p, None))
            else:
                raise UserError(f"{option}={p}", "no such file or folder", SEARCH_FIX)
        if not hits:  # only folders, none holding a checkpoint
            raise UserError(f"{option}={paths[0]}", f"no {LAST} in this folder", SEARCH_FIX)
        for hit in hits:
            found.setdefault(hit.path.resolve(), hit)
    return list(found.values())


def newest_checkpoint(value: str, doing: str) -> Path:
    """The newest checkpoint ``ckpt=value`` names (:func:`find_checkpoints`), printing the others when
    there are several; ``doing`` is the tool's verb (``drawing``, ``exporting``)."""
    paths = sorted((hit.path for hit in find_checkpoints([value])), key=lambda p: p.stat().st_mtime, reverse=True)
    if len(paths) > 1:
        others = "\n".join(f"  {p}" for p in paths[1:])
        print(f"ckpt={value} matches {len(paths)} checkpoints; {doing} the newest, {paths[0]}; the others:\n{others}")
    return paths[0]


def load_checkpoint(path: str | Path) -> dict:
    """The checkpoint at ``path`` as a dict, loaded on the CPU with ``weights_only=True``; a :class:`CheckpointError`
    when the file is missing, truncated or corrupt, needs arbitrary Python objects to unpickle, or lacks the
    ``hyper_parameters.cfg`` the tools rebuild the model from."""
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"ckpt={path}: a folder, not a checkpoint file; pass {example_checkpoint(path)}")
    if not path.is_file():
        raise CheckpointError(f"ckpt={path}: no such file")
    try:
        checkpoint = load_weights_only(path)
    except NotLoadable as err:
        fix = (
            ". vitpos checkpoints hold only tensors and plain containers; this file was not written by vitpos, "
            "or was tampered with. Do NOT load it with weights_only=False: that is exactly what would run its code"
            if err.crafted
            else "; pass a .ckpt written by a vitpos run, e.g. <run folder>/checkpoints/last.ckpt"
        )
        raise CheckpointError(f"ckpt={path}: {err}{fix}") from None
    hparams = checkpoint.get("hyper_parameters") if isinstance(checkpoint, dict) else None
    cfg = hparams.get("cfg") if isinstance(hparams, dict) else None
    if not isinstance(cfg, dict) or "state_dict" not in checkpoint:
        raise CheckpointError(
            f"ckpt={path}: not a vitpos checkpoint (no state_dict, or no hyper_parameters.cfg to rebuild the run "
            "from: a bare state_dict, such as timm's, has none); pass a .ckpt written by python train.py, e.g. "
            "<run folder>/checkpoints/last.ckpt"
        )
    return checkpoint


def example_checkpoint(folder: Path) -> str:
    """The first ``last.ckpt`` below ``folder``, for a message that asked for a file and got a folder."""
    return str(min(folder.rglob(LAST), default=f"{folder}/<run folder>/checkpoints/{LAST}"))


def task_kind(cfg: dict) -> str:
    """``"len"`` for a sequence run, ``"res"`` for an image run (older configs lack ``task``)."""
    task = (cfg.get("task") or {}).get("name")
    sequence = task == "sequence" or (task is None and "train_len" in (cfg.get("data") or {}))
    return "len" if sequence else "res"
