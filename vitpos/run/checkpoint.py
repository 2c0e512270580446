"""Finding and loading checkpoints without running code from them: vitpos checkpoints hold only tensors and plain
containers, so every tool loads them with ``weights_only=True``, each failure one :class:`CheckpointError` naming the
file. :func:`find_checkpoints` is the one search behind every tool's ``ckpt=``; a run folder gives the checkpoint its
report scored (:func:`run_checkpoint`), so a tool prints the run's own numbers, and the file it chose and why.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from vitpos.cli.options import expand_paths
from vitpos.errors import CheckpointError, UserError  # CheckpointError: raised here, imported from here by callers
from vitpos.run.status import best_checkpoint, read_status
from vitpos.safe_load import NotLoadable, load_weights_only

#: train.py rewrites it at the end of every epoch
LAST = "last.ckpt"
#: the best by val/acc so far, numbered by its 1-based epoch (older runs: 0-based, the same pattern)
BEST = re.compile(r"best-epoch(\d+)(-v\d+)?\.ckpt")
SEARCH_FIX = "pass a .ckpt file, a runs folder or a glob pattern"
NAMED = "named by ckpt="
REPORTED = "the run's best by val/acc, which its report scored"
BEST_SO_FAR = "the run's best by val/acc so far (it has not finished)"
LAST_ONLY = "the run saved no best checkpoint"


class Found(NamedTuple):
    """A checkpoint ``ckpt=`` named, the folder it was found in (None: the file itself) and why this file."""

    path: Path
    root: Path | None
    why: str = NAMED

    def line(self) -> str | None:
        """``checkpoint: <file> (<why>)``, printed before a tool loads a file it chose (None: ckpt= named it)."""
        return f"checkpoint: {self.path} ({self.why})" if self.root is not None else None


def run_checkpoint(folder: Path) -> tuple[Path, str] | None:
    """(the checkpoint of the run whose checkpoints are in ``folder``, why it): ``metrics.json``'s
    ``best_checkpoint``, else the best so far, else ``last.ckpt``; None when it holds none."""
    run = folder.parent if folder.name == "checkpoints" else folder
    reported = best_checkpoint(run, read_status(run))
    if reported is not None and reported.is_file():
        return reported, REPORTED
    bests = [p for p in folder.iterdir() if BEST.fullmatch(p.name)] if folder.is_dir() else []
    if bests:  # one is kept (save_top_k=1); of several, the latest epoch
        return max(bests, key=lambda p: (int(BEST.fullmatch(p.name).group(1)), p.stat().st_mtime)), BEST_SO_FAR
    last = folder / LAST
    return (last, LAST_ONLY) if last.is_file() else None


def find_checkpoints(values: list[str], option: str = "ckpt") -> list[Found]:
    """Every checkpoint the ``ckpt=`` values name, in the order given, each once: globs expanded, a folder giving the
    checkpoint of every run below it (sorted), a file as named. Nothing found raises :class:`UserError`."""
    found: dict[Path, Found] = {}  # by the file it names, the first name kept
    for value in values:
        paths, hits = expand_paths(option, [value]), []
        for p in paths:
            if p.is_dir():
                folders = sorted({c.parent for c in p.rglob("*.ckpt") if c.name == LAST or BEST.fullmatch(c.name)})
                hits += [Found(path, p, why) for path, why in filter(None, map(run_checkpoint, folders))]
            elif p.exists():
                hits.append(Found(p, None))
            else:
                raise UserError(f"{option}={p}", "no such file or folder", SEARCH_FIX)
        if not hits:  # only folders, none holding a checkpoint
            raise UserError(f"{option}={paths[0]}", f"no {LAST} or best-epoch<N>.ckpt in this folder", SEARCH_FIX)
        for hit in hits:
            found.setdefault(hit.path.resolve(), hit)
    return list(found.values())


def newest_checkpoint(value: str, doing: str) -> Path:
    """The newest checkpoint ``ckpt=value`` names, printing the others and why this one; ``doing``: the tool's verb."""
    hits = sorted(find_checkpoints([value]), key=lambda hit: hit.path.stat().st_mtime, reverse=True)
    if len(hits) > 1:
        others = "".join(f"\n  {hit.path}" for hit in hits[1:])
        print(f"ckpt={value} matches {len(hits)} checkpoints; {doing} the newest, {hits[0].path}; the others:{others}")
    if hits[0].line():
        print(hits[0].line())
    return hits[0].path


def load_checkpoint(path: str | Path) -> dict:
    """The checkpoint at ``path``, loaded on the CPU with ``weights_only=True``; a :class:`CheckpointError` when it is
    missing, corrupt, needs arbitrary objects to unpickle, or lacks the ``hyper_parameters.cfg`` tools rebuild from."""
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
