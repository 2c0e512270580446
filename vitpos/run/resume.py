"""Resume policy: whether a command continues, reuses or refuses what its run folder holds.

``resume`` (configs/train.yaml): ``auto`` continues ``last.ckpt`` when it was
trained with the same run-defining config (:func:`vitpos.run.identity.identity`)
and refuses it otherwise; ``true`` continues it regardless; ``false`` refuses to
touch a folder that holds a run; a path continues from that checkpoint. A run
whose ``metrics.json`` says ``complete`` is not trained again
(:func:`finished_run`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig

from vitpos.errors import CheckpointError, DivergenceError, UserError
from vitpos.run.checkpoint import load_checkpoint
from vitpos.run.identity import identity
from vitpos.run.status import read_status

log = logging.getLogger("vitpos")


def config_differences(saved: dict, current: dict, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two plain configs."""
    keys = sorted(set(saved) | set(current))
    out = []
    for k in keys:
        a, b = saved.get(k), current.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            out += config_differences(a, b, f"{prefix}{k}.")
        elif a != b:
            out.append(f"{prefix}{k}: {a!r} in the checkpoint, {b!r} now")
    return out


def check_same_run(cfg: DictConfig, last: Path) -> None:
    """Refuse to continue a checkpoint whose run-defining config
    (:func:`vitpos.run.identity.identity`: what the folder's hash covers) differs;
    settings that only change where or how a run is shown may differ."""
    saved = load_checkpoint(last)["hyper_parameters"]["cfg"]  # weights_only=True: a crafted file is refused
    diffs = config_differences(identity(saved), identity(cfg))
    if diffs:
        raise UserError(
            "resume",
            f"{last} belongs to a run with another configuration ({'; '.join(diffs[:3])}"
            f"{'; ...' if len(diffs) > 3 else ''})",
            "pass run.label=<name> or run.root=<dir> for a new run, or resume=true to continue that checkpoint anyway",
        )


def resume_path(cfg: DictConfig, ckpt_dir: Path) -> str | None:
    """The checkpoint to continue from, per ``resume`` (see configs/train.yaml)."""
    last = ckpt_dir / "last.ckpt"
    mode = cfg.get("resume", "auto")
    if mode in (None, False, "false", "never"):
        if ckpt_dir.exists() and any(ckpt_dir.iterdir()):
            raise UserError(
                "resume",
                f"resume=false but {ckpt_dir.parent} already holds a run",
                "pass resume=auto to continue it, seed=<other> or run.label=<name> for a new run, or delete the folder",
            )
        return None
    if mode in (True, "true", "auto"):
        if last.exists():
            if mode == "auto":
                check_same_run(cfg, last)
            else:
                load_checkpoint(last)  # refuses a crafted or torn file with one line, before the Trainer
            log.info("resuming from %s", last)
            return str(last)
        if mode is True or mode == "true":
            raise UserError("resume", f"resume=true but {last} does not exist", "use resume=auto to start fresh")
        return None
    check_resume_file(cfg, Path(str(mode)))
    return str(mode)


def check_resume_file(cfg: DictConfig, path: Path) -> None:
    """``resume=PATH``: the file opens safely (``weights_only=True``) and was trained for the same
    task, model and encoding, checked before the Trainer starts (a mismatch would otherwise stop
    training midway with a tensor size error)."""
    try:
        saved = load_checkpoint(path)["hyper_parameters"]["cfg"]
    except CheckpointError as err:
        raise UserError(
            "resume", f"{path}: " + str(err).removeprefix(f"ckpt={path}: "), "pass resume=PATH to a vitpos last.ckpt"
        ) from None
    current = identity(cfg)
    theirs = identity(saved)
    for section in ("task", "model", "encoding"):
        key = "name" if section != "model" else None
        a = theirs.get(section, {}) if key is None else (theirs.get(section) or {}).get(key)
        b = current.get(section, {}) if key is None else (current.get(section) or {}).get(key)
        if a != b:
            raise UserError(
                "resume",
                f"{path} was trained with another {section} ({section}: {a!r} there, {b!r} now)",
                "resume=PATH continues a checkpoint of the same task, model and encoding",
            )


def finished_run(cfg: DictConfig, out: Path) -> dict[str, float] | None:
    """The stored metrics when ``out`` holds this very run, finished and tested
    (``metrics.json`` says complete with the same ``trainer.max_epochs``):
    rerunning the command then reports them instead of training again. A run
    that diverged is refused (it would diverge again)."""
    status = read_status(out)
    if status is None or cfg.get("resume", "auto") not in (True, "true", "auto"):
        return None
    last = out / "checkpoints" / "last.ckpt"
    if last.exists() and cfg.get("resume", "auto") == "auto":
        check_same_run(cfg, last)
    if status["status"] == "diverged":
        raise DivergenceError(
            f"{out} holds a run that diverged ({status.get('reason', 'see metrics.json')}); "
            "pass run.label=<name> for a new run with other options, or delete the folder"
        )
    if status["status"] == "complete" and status.get("max_epochs") == cfg.trainer.get("max_epochs"):
        return status["metrics"]
    return None
