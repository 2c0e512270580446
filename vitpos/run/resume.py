"""Resume policy: whether a command continues, reuses or refuses what its run folder holds.

``resume`` (configs/train.yaml): ``auto`` continues ``last.ckpt`` only if its run-defining config
(:func:`vitpos.run.identity.identity`) matches; ``true`` continues it regardless; ``false`` refuses a
folder that holds a run; a path continues from that checkpoint. A run whose ``metrics.json`` says
``complete`` is not trained again (:func:`finished_run`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig

from vitpos.errors import CheckpointError, DivergenceError, UserError
from vitpos.run.checkpoint import example_checkpoint, load_checkpoint
from vitpos.run.identity import identity
from vitpos.run.status import read_status


def config_differences(saved: dict, current: dict, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two plain configs."""
    out = []
    for k in sorted(set(saved) | set(current)):
        a, b = saved.get(k), current.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            out += config_differences(a, b, f"{prefix}{k}.")
        elif a != b:
            out.append(f"{prefix}{k}: {a!r} in the checkpoint, {b!r} now")
    return out


#: fix for a run folder's own ``last.ckpt`` that cannot be continued
OWN_FIX = "delete it to train this run from the start, or pass resume=false run.label=<name> for a new run beside it"


def read_resumable(path: Path, fix: str) -> dict:
    """The checkpoint at ``path``, loaded safely; a folder, a missing, torn or crafted file is refused as
    ``resume: <path>: <what> (<fix>)``."""
    if path.is_dir():
        raise UserError(
            "resume", f"{path} is a folder, not a checkpoint file", f"pass resume={example_checkpoint(path)}"
        )
    try:
        return load_checkpoint(path)
    except CheckpointError as err:
        what = " ".join(str(err).removeprefix(f"ckpt={path}: ").split())
        raise CheckpointError(str(UserError("resume", f"{path}: {what}", fix))) from None


def other_weights(saved: dict, cfg: DictConfig) -> str | None:
    """The first difference between ``saved`` and ``cfg`` that no ``resume`` value can override, e.g.
    ``"another task (task: 'sequence' there, 'classification' now)"``; None when the weights fit."""
    theirs, current = identity(saved), identity(cfg)
    for section in ("task", "model", "encoding"):
        a, b = theirs.get(section) or {}, current.get(section) or {}
        # the task and the encoding by name, the model by every key but its regularizers (drop_path, ...)
        keys = sorted(k for k in set(a) | set(b) if "drop" not in k) if section == "model" else ["name"]
        for key in keys:
            if a.get(key) != b.get(key):
                where = f"model.{key}" if section == "model" else section
                return f"another {section} ({where}: {a.get(key)!r} there, {b.get(key)!r} now)"
    return None


def check_same_run(cfg: DictConfig, last: Path, checkpoint: dict | None = None) -> None:
    """Refuse ``last`` if its run-defining config (:func:`vitpos.run.identity.identity`, what the folder
    hash covers) differs. The fix offers ``resume=true`` only when the weights fit (:func:`other_weights`)."""
    saved = (checkpoint or read_resumable(last, OWN_FIX))["hyper_parameters"]["cfg"]
    if not (diffs := config_differences(identity(saved), identity(cfg))):
        return
    if other := other_weights(saved, cfg):  # resume=true would fail too
        raise UserError("resume", f"{last} holds a checkpoint of {other}", OWN_FIX)
    raise UserError(
        "resume",
        f"{last} belongs to a run with another configuration ({'; '.join(diffs[:3])}"
        f"{'; ...' if len(diffs) > 3 else ''})",
        "pass run.label=<name> or run.root=<dir> for a new run, or resume=true to continue that checkpoint anyway",
    )


def check_continuable(checkpoint: dict, path: Path, cfg: DictConfig, fix: str) -> None:
    """Refuse, before the Trainer starts, a checkpoint Lightning could not continue: another task,
    model or encoding (a size-mismatch traceback later), or weights without optimizer and loop state."""
    if other := other_weights(checkpoint["hyper_parameters"]["cfg"], cfg):
        raise UserError("resume", f"{path} was trained with {other}", fix)
    if "pytorch-lightning_version" not in checkpoint or "optimizer_states" not in checkpoint:
        raise UserError("resume", f"{path} holds weights only, not a training state to continue", fix)


def check_weights_fit(module, path: str | Path) -> None:
    """Refuse, before any file is written, a ``state_dict`` whose keys or shapes do not fit ``module`` (Lightning's
    strict load would fail midway), e.g. a learned position table of another ``data.img_size``."""
    state, own = load_checkpoint(path)["state_dict"], module.state_dict()
    problems = [f"{k} missing" for k in own if k not in state]
    problems += [f"{k} not in this model" for k in state if k not in own]
    problems += [
        f"{k} {tuple(state[k].shape)} there, {tuple(v.shape)} now"
        for k, v in own.items()
        if k in state and hasattr(state[k], "shape") and tuple(state[k].shape) != tuple(v.shape)
    ]
    if problems:
        raise UserError(
            "resume",
            f"{path} holds weights that do not fit this model ({'; '.join(problems[:2])}"
            f"{f'; {len(problems) - 2} more' if len(problems) > 2 else ''})",
            "pass run.label=<name> for a new run, or resume=PATH to a checkpoint of this configuration",
        )


def resume_path(cfg: DictConfig, ckpt_dir: Path) -> str | None:
    """The checkpoint to continue from, per ``resume`` (see configs/train.yaml)."""
    last, mode = ckpt_dir / "last.ckpt", cfg.get("resume", "auto")
    if mode in (None, False, "false", "never"):
        if ckpt_dir.exists() and any(ckpt_dir.iterdir()):
            raise UserError(
                "resume",
                f"resume=false but {ckpt_dir.parent} already holds a run",
                "pass resume=auto to continue it, seed=<other> or run.label=<name> for a new run, or delete the folder",
            )
        return None
    if mode not in (True, "true", "auto"):  # resume=PATH
        path, fix = Path(str(mode)), "resume=PATH continues a checkpoint of the same task, model and encoding"
        check_continuable(read_resumable(path, "pass resume=PATH to a vitpos last.ckpt"), path, cfg, fix)
        return str(mode)
    if not last.exists():
        if mode != "auto":
            raise UserError("resume", f"resume=true but {last} does not exist", "use resume=auto to start fresh")
        return None
    checkpoint = read_resumable(last, OWN_FIX)
    if mode == "auto":
        check_same_run(cfg, last, checkpoint)
    check_continuable(checkpoint, last, cfg, OWN_FIX)  # also for resume=true
    logging.getLogger("vitpos").info("resuming from %s", last)
    return str(last)


def finished_run(cfg: DictConfig, out: Path) -> dict[str, float] | None:
    """The stored metrics if ``out`` holds this run complete with the same ``trainer.max_epochs``
    (reported instead of training again), else None. A diverged run is refused: it would diverge again."""
    status, mode = read_status(out), cfg.get("resume", "auto")
    if status is None or mode not in (True, "true", "auto"):
        return None
    if mode == "auto" and (last := out / "checkpoints" / "last.ckpt").exists():
        check_same_run(cfg, last)
    if status["status"] == "diverged":
        raise DivergenceError(
            f"{out} holds a run that diverged ({status.get('reason', 'see metrics.json')}); "
            "pass run.label=<name> for a new run with other options, or delete the folder"
        )
    if status["status"] == "complete" and status.get("max_epochs") == cfg.trainer.get("max_epochs"):
        return status["metrics"]
    return None
