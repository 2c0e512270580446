"""Claiming a run folder for one process (:func:`claim`): ``<run folder>/.lock`` (pid, host, start time, taken by rank
0) refuses a second command for the same run while its process lives, a stale one (``kill -9``, a reused pid) is taken
over; a refused write ends the run with one line (:class:`DiskFault`); a run that fails before its first checkpoint or
``metrics.json`` removes the folders it created (``compare`` would list them), unless a signal stopped it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from vitpos.errors import InputError, UserError
from vitpos.files import DISK_ERRORS, WriteError, atomic_write_text
from vitpos.run.process import process_alive, start_time

LOCK = ".lock"
RANK_VARIABLES = ("RANK", "SLURM_PROCID", "LOCAL_RANK", "NODE_RANK")  # torchrun / srun / Lightning
IN_USE_FIX = "wait for it to finish, or pass seed=<k> or run.label=<name> for another run"


def is_main_process() -> bool:
    """Rank 0 under every launcher; a second node's local rank 0 is not (it would claim the folder too)."""
    return all(os.environ.get(name, "0") == "0" for name in RANK_VARIABLES)


def read_lock(folder: Path) -> dict | None:
    try:
        body = json.loads((folder / LOCK).read_text())
    except (OSError, ValueError):
        return None
    return body if isinstance(body, dict) and isinstance(body.get("pid"), int) else None


def acquire(folder: Path, option: str = "run folder", fix: str = IN_USE_FIX, command: str = "train.py") -> Path:
    """Lock ``folder`` (a run folder, or a sweep's ``hydra.sweep.dir``); refuse if a live process holds it."""
    holder = read_lock(folder)
    if holder is not None and holder["pid"] != os.getpid():  # a dead holder on this host: stale, taken over
        if holder.get("host") != socket.gethostname() or process_alive(holder["pid"], holder.get("started")):
            who = f"{holder['pid']} on {holder.get('host', '?')} (started {holder.get('command', 'the same run')})"
            if holder.get("host") != socket.gethostname():  # a copied folder: only its owner knows the process
                fix += (f"; a folder copied from {holder.get('host', '?')}: once process {holder['pid']} there has "
                        f"ended, remove {folder / LOCK}")  # fmt: skip
            raise UserError(option, f"{folder} is in use by process {who}", fix)
    body = {"pid": os.getpid(), "started": start_time(os.getpid()), "host": socket.gethostname(), "command": command}
    return atomic_write_text(folder / LOCK, json.dumps(body) + "\n")


def release(folder: Path) -> None:
    holder = read_lock(folder)
    if holder is not None and holder["pid"] == os.getpid():
        with suppress(OSError):  # read-only now: the lock goes stale at exit
            (folder / LOCK).unlink(missing_ok=True)


def holds_results(folder: Path) -> bool:
    """Whether a failed run left a checkpoint or ``metrics.json`` (the diverged marker ``compare`` lists)."""
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
    """A write the disk refused during a run: one line, exit code 2, like any input the user can fix."""


def disk_fault(error: BaseException, folder: Path) -> DiskFault | None:
    """``error`` as a :class:`DiskFault` when it is an ``OSError`` in :data:`vitpos.files.DISK_ERRORS`, else None."""
    if isinstance(error, DiskFault) or not isinstance(error, OSError) or error.errno not in DISK_ERRORS:
        return None
    return DiskFault(getattr(error, "path", None) or error.filename or folder, error)


@contextmanager
def claim(folder: Path, root: Path) -> Iterator[None]:
    """Hold ``folder`` for this run (see the module docstring)."""
    existed, main = folder.exists(), is_main_process()
    try:
        if main:
            folder.mkdir(parents=True, exist_ok=True)  # a read-only or full run.root: a DiskFault below
            acquire(folder)
        yield
    except Exception as error:  # bad input, a live holder of the lock or an early crash
        if main and not existed and folder.exists() and not holds_results(folder):  # its lock goes in `finally`
            shutil.rmtree(folder, ignore_errors=True)
            remove_empty_parents(folder, root)
            why = "nothing trained" if isinstance(error, InputError) else "failed before its first checkpoint"
            logging.getLogger("vitpos").info("(%s: the run folder %s was removed again)", why, folder)
        if (fault := disk_fault(error, folder)) is not None:
            raise fault from error
        raise
    finally:
        if main:
            release(folder)
