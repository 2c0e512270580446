"""Checks of the plain options that no schema field's own rule (:data:`vitpos.config.OPTIONS`) covers, before
anything is written and without torch: ``task.name`` and the options each task needs, a sweep's launcher options,
run folder names, the thread count and the ``trainer.*`` keys (the one check that imports Lightning).
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from vitpos.config import LAUNCHER
from vitpos.config.rules import ABSENT, check_value, lookup
from vitpos.errors import UserError

#: the launchers whose options a sweep may set (Hydra's basic launcher takes none)
LAUNCHERS_WITH_OPTIONS = "hydra/launcher=vitpos_local, vitpos_slurm or joblib"


def check_launcher(launcher: dict) -> None:
    """The options of :data:`LAUNCHER` the sweep's ``launcher`` config has; for a typed one (every Hydra launcher
    plugin's), no key its class lacks: ``+hydra.launcher.nosuch=1`` would fail only after the sweep began."""
    schema = OmegaConf.get_type(launcher) if isinstance(launcher, DictConfig) else None
    if dataclasses.is_dataclass(schema):
        known = [field.name for field in dataclasses.fields(schema)]
        for key in launcher:
            if key not in known:
                valid = ", ".join(k for k in known if not k.startswith("_"))
                fix = f"valid: {valid}" if valid else f"{LAUNCHERS_WITH_OPTIONS} take some"
                raise UserError(f"hydra.launcher.{key}", f"not an option of {schema.__name__}", fix)
    for key, spec in LAUNCHER.items():
        if key in launcher:
            check_value(f"hydra.launcher.{key}", spec, launcher[key])


def check_task(task) -> bool:
    """True for an image task, False for a sequence one; else a :class:`UserError` naming ``task.name``, before the
    run folder exists."""
    name = task.get("name") if isinstance(task, dict) else None
    if name not in ("classification", "sequence"):  # the tasks vitpos.tasks.build.build knows (configs/task/)
        raise UserError("task.name", f"unknown task {name!r}", "valid: classification, sequence (task=...)")
    return name != "sequence"


#: options read without a default, by task (None: every task); ``~key`` or the other task's config can drop one
NEEDS = {
    None: ("data", "model", "encoding", "optim", "trainer", "run", "optim.lr", "trainer.max_epochs"),
    "model": ("model.dim", "model.depth", "model.num_heads"),  # not for model=timm: timm's model has them
    "image": ("data.name", "data.img_size"),
    "image model": ("model.patch_size",),  # not for model=timm either
    "sequence": ("data.task", "data.train_len", "data.vocab_size"),
}
#: where a missing option of a section comes from: the group configs of each task
SOURCES = {
    ("model", True): "an image model config sets it, e.g. model=vit_micro (configs/model/)",
    ("model", False): "a sequence model config sets it: model=seq_small",
    ("data", True): "an image data config sets it: data=cifar10 or data=shapes",
    ("data", False): "a sequence data config sets it, e.g. data=seq_copy (configs/data/)",
}


def check_needed(c: dict, image: bool, timm: bool) -> None:
    """Every option of :data:`NEEDS` this task reads is present; ``timm`` (``model=timm``) needs no geometry."""
    groups = [None, "image" if image else "sequence"] + ([] if timm else ["model"] + ["image model"] * image)
    for option in (o for g in groups for o in NEEDS[g]):
        if lookup(c, option) is ABSENT:
            fix = SOURCES.get((option.split(".")[0], image), f"configs/ sets it; '~{option}' deletes it")
            raise UserError(option, f"missing, and the {'image' if image else 'sequence'} task needs it", fix)


def check_run_names(run: dict) -> None:
    """``run.group``, ``run.model`` and ``run.label`` (null: the model config's name, the encoding's) become folder
    names under ``run.root``: plain names, nothing that leaves it."""
    for key in [k for k in ("group", "model", "label") if k == "group" or run.get(k) is not None]:
        text = str(run.get(key))
        if not text or text in (".", "..") or any(ch in text for ch in "/\\\0") or text.startswith("~"):
            fix = "no '/', '..' or absolute path; use run.root=DIR to choose where runs go"
            raise UserError(f"run.{key}", f"must be a plain folder name, got {text!r}", fix)


def check_run_root(root) -> None:
    """``run.root``: a folder's path (made if missing), not empty (this folder) nor a file or a path through one."""
    fix = "give the folder runs go in, e.g. run.root=runs"
    text = "" if root is None else str(root)
    if not text.strip():
        raise UserError("run.root", "empty: the runs would land in the current folder", fix)
    blocking = next((p for p in (Path(text), *Path(text).parents) if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        where = "is a file" if str(blocking) == text else f"lies inside the file {blocking}"
        raise UserError("run.root", f"{text} {where}, not a folder", fix)


def check_threads(threads) -> None:
    """``threads``: auto, a positive integer or null (the rule is :func:`vitpos.runtime.resolve_threads`)."""
    from vitpos.runtime import resolve_threads

    try:
        if isinstance(threads, bool):  # resolve_threads would take true for 1 thread
            raise ValueError(threads)
        resolve_threads(threads)
    except ValueError as err:
        fix = "valid: auto, a positive integer, or null"
        raise UserError("threads", f"{threads!r} is not a thread count", fix) from err


def check_trainer_values(trainer: dict) -> None:
    """``trainer.precision`` and ``trainer.devices`` as Lightning takes them, refused in one line (Lightning refuses
    them only when the Trainer is made, with a traceback)."""
    import typing

    from lightning.fabric.plugins.precision.precision import _PRECISION_INPUT

    valid = [v for literal in typing.get_args(_PRECISION_INPUT) for v in typing.get_args(literal)]
    precision = trainer.get("precision", "auto")
    if precision != "auto" and (isinstance(precision, bool) or precision not in valid):
        names = ", ".join(dict.fromkeys(str(v) for v in valid))
        raise UserError("trainer.precision", f"{precision!r} is not a precision", f"valid: auto, {names}")
    devices = trainer.get("devices", "auto")
    fine = (
        devices == "auto"
        or (isinstance(devices, int) and not isinstance(devices, bool) and (devices >= 1 or devices == -1))
        or (isinstance(devices, str) and devices.strip() not in ("", "0"))
        or (isinstance(devices, list) and devices and all(isinstance(d, int) and d >= 0 for d in devices))
    )
    if not fine:
        raise UserError("trainer.devices", f"{devices!r} is not a device count or list",
                        "valid: auto, a count of 1 or more, -1 for all, or a list of indices like [0,1]")  # fmt: skip


def check_trainer_keys(trainer: dict) -> None:
    """A key ``lightning.pytorch.Trainer`` does not take is refused with the closest one it does."""
    from lightning.pytorch import Trainer

    valid = set(inspect.signature(Trainer.__init__).parameters) - {"self"}
    for key in trainer:
        if key not in valid:
            close = difflib.get_close_matches(key, sorted(valid), n=1)
            hint = f"did you mean trainer.{close[0]}?" if close else "see lightning.pytorch.Trainer for the valid keys"
            raise UserError(f"trainer.{key}", "not an option of Lightning's Trainer", hint)
