"""Claiming a run folder for one process, and leaving nothing behind when a run fails early.

:func:`claim` wraps a training run:

- **a lock**: ``<run folder>/.lock`` holds the process id and host of the run
  using the folder. A second command for the same run, started while the
  first is alive, is refused with a line naming that process. A lock whose
  process is gone (a killed run) is taken over.
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
from vitpos.files import atomic_write_text

LOCK = ".lock"


def is_main_process() -> bool:
    return os.environ.get("LOCAL_RANK", "0") == "0" and os.environ.get("NODE_RANK", "0") == "0"


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user
        return True
    return True


def read_lock(folder: Path) -> dict | None:
    try:
        body = json.loads((folder / LOCK).read_text())
    except (OSError, ValueError):
        return None
    return body if isinstance(body, dict) and isinstance(body.get("pid"), int) else None


def acquire(folder: Path) -> Path:
    """Write ``folder/.lock`` for this process; refuse when a live process holds it."""
    holder = read_lock(folder)
    if holder is not None and holder["pid"] != os.getpid():
        same_host = holder.get("host") == socket.gethostname()
        if not same_host or process_alive(holder["pid"]):
            raise UserError(
                "run folder",
                f"{folder} is in use by process {holder['pid']} on {holder.get('host', '?')} "
                f"(started {holder.get('command', 'the same run')})",
                "wait for it to finish, or pass seed=<k> or run.label=<name> for another run",
            )
    body = {"pid": os.getpid(), "host": socket.gethostname(), "command": "train.py"}
    return atomic_write_text(folder / LOCK, json.dumps(body) + "\n")


def release(folder: Path) -> None:
    holder = read_lock(folder)
    if holder is not None and holder["pid"] == os.getpid():
        (folder / LOCK).unlink(missing_ok=True)


def holds_results(folder: Path) -> bool:
    """Whether a failed run left something worth keeping: a checkpoint, or its ``metrics.json``
    (the diverged marker that ``compare`` lists)."""
    return (folder / "metrics.json").exists() or any(folder.rglob("*.ckpt"))


def remove_empty_parents(folder: Path, root: Path) -> None:
    """Remove the folders between ``folder`` and ``root`` (inclusive) that are now empty."""
    for parent in folder.parents:
        if not parent.is_relative_to(root) or not parent.is_dir() or any(parent.iterdir()):
            break
        parent.rmdir()


@contextmanager
def claim(folder: Path, root: Path) -> Iterator[None]:
    """Hold ``folder`` for this run (see the module docstring)."""
    existed = folder.exists()
    main = is_main_process()
    if main:
        folder.mkdir(parents=True, exist_ok=True)
        acquire(folder)
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
        raise
    finally:
        if main:
            release(folder)
