"""A run's plan, decided once (:func:`plan_run`): its identity, folder and label, the folder claimed, and what
it holds: a finished run to report, a checkpoint to continue, or nothing (train from the start).

``resume`` (configs/train.yaml): ``auto`` continues ``last.ckpt`` only if its run-defining config
(:func:`vitpos.run.identity.identity`) matches; ``true`` regardless; ``false`` refuses a folder that holds a
run; a path continues that checkpoint. A run ``complete`` at the same ``trainer.max_epochs`` is not trained
again; a diverged one is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from omegaconf import DictConfig

from vitpos.errors import CheckpointError, DivergenceError, UserError
from vitpos.run.checkpoint import LAST, example_checkpoint, load_checkpoint, task_kind
from vitpos.run.folder import claim
from vitpos.run.identity import identity, record, run_dir, run_label
from vitpos.run.status import best_checkpoint, read_status

log = logging.getLogger("vitpos")

#: fix for a run folder's own ``last.ckpt`` that cannot be continued
OWN_FIX = "delete it to train this run from the start, or pass resume=false run.label=<name> for a new run beside it"
#: fix for a ``resume=PATH`` that cannot be continued
PATH_FIX = "resume=PATH continues a checkpoint of the same task, model and encoding"


@dataclass(frozen=True)
class RunPlan:
    """What one command does with its run folder, computed once by :func:`plan_run`."""

    folder: Path  #: runs/<group>/<model>/<label>-<hash>/seed<k>
    label: str  #: the encoding as the folder names it (:func:`vitpos.run.identity.run_label`)
    kind: str  #: ``res`` (images) or ``len`` (sequences): how scores beyond the training size are named
    identity: dict  #: the run-defining config (:func:`vitpos.run.identity.identity`)
    finished: dict[str, float] | None = None  #: a finished run's stored metrics: report them, train nothing
    best: Path | None = None  #: the checkpoint a finished run's report scored
    resume: str | None = None  #: the checkpoint to continue from
    shapes: dict | None = None  #: its weights' shapes (None: not a tensor), checked by :meth:`check_fits`

    @property
    def name(self) -> str:
        """``<label>/seed<k>``: the run in progress bars and per-epoch lines."""
        return f"{self.label}/{self.folder.name}"

    def check_fits(self, module) -> None:
        """Refuse, before any file is written, weights whose keys or shapes do not fit ``module`` (Lightning's
        strict load would fail midway), e.g. a position table of another ``data.img_size``."""
        if self.shapes is None:
            return
        own = {k: tuple(v.shape) for k, v in module.state_dict().items()}
        problems = [f"{k} missing" for k in own if k not in self.shapes]
        problems += [f"{k} not in this model" for k in self.shapes if k not in own]
        theirs = self.shapes
        problems += [f"{k} {theirs[k]} there, {s} now" for k, s in own.items() if theirs.get(k) not in (s, None)]
        if problems:
            more = f"; {len(problems) - 2} more" if len(problems) > 2 else ""
            raise UserError(
                "resume",
                f"{self.resume} holds weights that do not fit this model ({'; '.join(problems[:2])}{more})",
                "pass run.label=<name> for a new run, or resume=PATH to a checkpoint of this configuration",
            )


@contextmanager
def plan_run(cfg: DictConfig) -> Iterator[RunPlan]:
    """The run's :class:`RunPlan`, held inside its claimed folder (a refused resume leaves no debris)."""
    record(cfg)  # the data's fingerprint, the resolved precision, the machine: saved with the run
    ident = identity(cfg)
    plan = RunPlan(run_dir(cfg, ident), run_label(cfg), task_kind(cfg), ident)
    log.info("run folder: %s", plan.folder)
    with claim(plan.folder, Path(cfg.run.root)):  # also words a write the disk refused (one line: path, cause)
        fast = cfg.trainer.fast_dev_run  # writes nothing, so reads nothing either
        yield plan if fast else decide(plan, cfg.get("resume", "auto"), cfg.trainer.get("max_epochs"))


def decide(plan: RunPlan, mode, max_epochs) -> RunPlan:
    """``plan`` with what its folder holds decided, per ``resume`` (``mode``, see the module docstring)."""
    checkpoints = plan.folder / "checkpoints"
    if mode in (None, False, "false", "never"):
        if checkpoints.exists() and any(checkpoints.iterdir()):
            raise UserError(
                "resume",
                f"resume=false but {plan.folder} already holds a run",
                "pass resume=auto to continue it, seed=<other> or run.label=<name> for a new run, or delete the folder",
            )
        return plan
    if mode not in (True, "true", "auto"):  # resume=PATH
        path = Path(str(mode))
        return continued(plan, path, *read_resumable(path, "pass resume=PATH to a vitpos last.ckpt"), PATH_FIX)
    last, status = checkpoints / LAST, read_status(plan.folder)
    saved, theirs = read_resumable(last, OWN_FIX) if last.exists() else (None, None)
    if mode == "auto" and theirs is not None:
        check_same_run(theirs, plan.identity, last)
    if status is not None and status["status"] == "diverged":  # it would diverge again
        raise DivergenceError(
            f"{plan.folder} holds a run that diverged ({status.get('reason', 'see metrics.json')}); "
            "pass run.label=<name> for a new run with other options, or delete the folder"
        )
    if status is not None and status["status"] == "complete" and status.get("max_epochs") == max_epochs:
        return replace(plan, finished=status["metrics"], best=best_checkpoint(plan.folder, status) or last)
    if saved is None:
        if mode != "auto":
            raise UserError("resume", f"resume=true but {last} does not exist", "use resume=auto to start fresh")
        return plan
    log.info("resuming from %s", last)
    return continued(plan, last, saved, theirs, OWN_FIX)


def continued(plan: RunPlan, path: Path, checkpoint: dict, theirs: dict, fix: str) -> RunPlan:
    """``plan`` continuing ``checkpoint`` (``theirs``: its identity); refused where Lightning could not continue
    it: another task, model or encoding, or weights without optimizer and loop state."""
    if other := other_weights(theirs, plan.identity):
        raise UserError("resume", f"{path} was trained with {other}", fix)
    if "pytorch-lightning_version" not in checkpoint or "optimizer_states" not in checkpoint:
        raise UserError("resume", f"{path} holds weights only, not a training state to continue", fix)
    shapes = {k: tuple(v.shape) if hasattr(v, "shape") else None for k, v in checkpoint["state_dict"].items()}
    return replace(plan, resume=str(path), shapes=shapes)


def read_resumable(path: Path, fix: str) -> tuple[dict, dict]:
    """The checkpoint at ``path``, loaded safely, and its config's identity; a folder, a missing, torn or
    crafted file is refused as ``resume: <path>: <what> (<fix>)``."""
    if path.is_dir():
        raise UserError(
            "resume", f"{path} is a folder, not a checkpoint file", f"pass resume={example_checkpoint(path)}"
        )
    try:
        checkpoint = load_checkpoint(path)
    except CheckpointError as err:
        what = " ".join(str(err).removeprefix(f"ckpt={path}: ").split())
        raise CheckpointError(str(UserError("resume", f"{path}: {what}", fix))) from None
    return checkpoint, identity(checkpoint["hyper_parameters"]["cfg"])


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


def other_weights(theirs: dict, current: dict) -> str | None:
    """The first difference between two identities that no ``resume`` value can override, e.g.
    ``"another task (task: 'sequence' there, 'classification' now)"``; None when the weights fit."""
    for section in ("task", "model", "encoding"):
        a, b = theirs.get(section) or {}, current.get(section) or {}
        # the task and the encoding by name, the model by every key but its regularizers (drop_path, ...)
        keys = sorted(k for k in set(a) | set(b) if "drop" not in k) if section == "model" else ["name"]
        for key in keys:
            if a.get(key) != b.get(key):
                where = f"model.{key}" if section == "model" else section
                return f"another {section} ({where}: {a.get(key)!r} there, {b.get(key)!r} now)"
    return None


def check_same_run(theirs: dict, current: dict, last: Path) -> None:
    """Refuse the run's own ``last`` if its identity (``theirs``) differs from ``current``; the fix offers
    ``resume=true`` only when the weights fit (:func:`other_weights`)."""
    if not (diffs := config_differences(theirs, current)):
        return
    if other := other_weights(theirs, current):  # resume=true would fail too
        raise UserError("resume", f"{last} holds a checkpoint of {other}", OWN_FIX)
    more = "; ..." if len(diffs) > 3 else ""
    raise UserError(
        "resume",
        f"{last} belongs to a run with another configuration ({'; '.join(diffs[:3])}{more})",
        "pass run.label=<name> or run.root=<dir> for a new run, or resume=true to continue that checkpoint anyway",
    )
