"""Claiming a run folder for one process, and leaving nothing behind when a run fails early.

:func:`claim` wraps a training run:

- **a lock**: ``<run folder>/.lock`` holds the process id and host of the run
  using the folder. A second command for the same run, started while the
  first is alive, is refused with a line naming that process. A lock whose
  process is gone (a killed run: ``kill -9``, a lost machine) is taken over; so is
  one whose process id now names another process (the lock records when its
  process started, :mod:`vitpos.run.process`).
- **disk faults**: a write the disk refuses during the run (no space, ``ulimit -f``, a
  read-only folder) ends it with one line naming the path and the cause (:class:`DiskFault`);
  the files written before it are intact (every checkpoint and ``metrics.json`` is written
  atomically, :mod:`vitpos.files`), so the same command continues once the fault is gone.
- **no debris**: when the run fails before it wrote a checkpoint or a
  ``metrics.json`` -- on bad input (an :class:`InputError`: a refused option,
  missing data, a bad checkpoint to resume from) or on any other exception (a
  crash in the first epoch) -- the folder it created is removed, with every
  parent below ``run.root`` that is then empty: there is nothing in it to
  resume from, and an empty folder would read as a run in ``compare``. A
  folder that existed before the command is left alone, and so is a run
  killed by a signal (its folder is resumed by the next identical command).

Only the main process takes the lock: DDP's other ranks (``LOCAL_RANK`` or
``NODE_RANK`` not 0) share the folder of rank 0.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vitpos.errors import InputError, UserError
from vitpos.files import DISK_ERRORS, WriteError, atomic_write_text
from vitpos.run.process import process_alive, start_time

LOCK = ".lock"


RANK_VARIABLES = ("RANK", "SLURM_PROCID", "LOCAL_RANK", "NODE_RANK")  # torchrun / srun (submitit) / Lightning


def is_main_process() -> bool:
    """The process that owns the run folder: rank 0 of every launcher's rank variables. A second node's
    local rank 0 (torchrun's RANK, srun's SLURM_PROCID) is not it: it would claim the folder too."""
    return all(os.environ.get(name, "0") == "0" for name in RANK_VARIABLES)


def read_lock(folder: Path) -> dict | None:
    try:
        body = json.loads((folder / LOCK).read_text())
    except (OSError, ValueError):
        return None
    return body if isinstance(body, dict) and isinstance(body.get("pid"), int) else None


def acquire(
    folder: Path,
    option: str = "run folder",
    fix: str = "wait for it to finish, or pass seed=<k> or run.label=<name> for another run",
    command: str = "train.py",
) -> Path:
    """Write ``folder/.lock`` for this process (``command``: what holds it); refuse, naming
    ``option`` and the ``fix``, when a live process holds it. A run holds its run folder; a sweep
    holds its ``hydra.sweep.dir`` too (hydra_plugins/vitpos_sweeper), whose job folders it reads."""
    holder = read_lock(folder)
    if holder is not None and holder["pid"] != os.getpid():
        same_host = holder.get("host") == socket.gethostname()
        if not same_host or process_alive(holder["pid"], holder.get("started")):  # else stale: a killed run's
            raise UserError(
                option,
                f"{folder} is in use by process {holder['pid']} on {holder.get('host', '?')} "
                f"(started {holder.get('command', 'the same run')})",
                fix,
            )
    body = {"pid": os.getpid(), "started": start_time(os.getpid()), "host": socket.gethostname(), "command": command}
    return atomic_write_text(folder / LOCK, json.dumps(body) + "\n")


def release(folder: Path) -> None:
    holder = read_lock(folder)
    if holder is not None and holder["pid"] == os.getpid():
        try:
            (folder / LOCK).unlink(missing_ok=True)
        except OSError:  # a folder that became read-only: the lock's process is gone once we exit
            pass


def holds_results(folder: Path) -> bool:
    """Whether a failed run left something worth keeping: a checkpoint, or its ``metrics.json``
    (the diverged marker that ``compare`` lists)."""
    return (folder / "metrics.json").exists() or any(folder.rglob("*.ckpt"))


def remove_empty_parents(folder: Path, root: Path) -> None:
    """Remove the folders between ``folder`` and ``root`` (inclusive) that are now empty."""
    for parent in folder.parents:
        if not parent.is_relative_to(root) or not parent.is_dir() or any(parent.iterdir()):
            break
        try:
            parent.rmdir()
        except OSError:  # read-only meanwhile: leave it
            break


class DiskFault(WriteError, InputError):
    """A write the disk refused during a run (no space, ``ulimit -f``, a read-only folder): one
    line naming the path and the cause, exit code 2, like every input the user can fix."""


def disk_fault(error: BaseException, folder: Path) -> DiskFault | None:
    """``error`` as a :class:`DiskFault` when it is a write the disk refused (a
    :class:`vitpos.files.WriteError`, or an ``OSError`` of :data:`vitpos.files.DISK_ERRORS` from a
    writer that is not vitpos's: an event file, ``hparams.yaml``); else None."""
    if isinstance(error, DiskFault) or not isinstance(error, OSError) or error.errno not in DISK_ERRORS:
        return None
    return DiskFault(getattr(error, "path", None) or error.filename or folder, error)


@contextmanager
def claim(folder: Path, root: Path) -> Iterator[None]:
    """Hold ``folder`` for this run (see the module docstring)."""
    existed = folder.exists()
    main = is_main_process()
    if main:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            acquire(folder)
        except OSError as error:  # a read-only or full run.root: one line naming the folder
            fault = disk_fault(error, folder)
            if fault is None:
                raise
            raise fault from error
    try:
        yield
    except Exception as error:  # bad input, or a crash before anything worth keeping was written
        if main:
            release(folder)
            if not existed and folder.exists() and not holds_results(folder):
                shutil.rmtree(folder, ignore_errors=True)
                remove_empty_parents(folder, root)
                why = "nothing trained" if isinstance(error, InputError) else "failed before its first checkpoint"
                logging.getLogger("vitpos").info("(%s: the run folder %s was removed again)", why, folder)
        fault = disk_fault(error, folder)
        if fault is not None:
            raise fault from error
        raise
    finally:
        if main:
            release(folder)
