"""Other processes on this machine, as the run lock and the sweep's stop see them, read from ``/proc`` (Linux; elsewhere
``os.kill(pid, 0)`` alone). A zombie is not alive; a start time other than the lock's recorded one: a reused id.
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")
GONE = ("Z", "X")  # zombie or dead: gone, only not yet reaped


def stat_fields(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` from its third field (the state) on, split after the command name's ``)``; or None."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (``/proc/<pid>/stat`` field 22), or None."""
    fields = stat_fields(pid)
    return int(fields[19]) if fields is not None and len(fields) > 19 else None


def process_alive(pid: int, started: int | None = None) -> bool:
    """Whether ``pid`` is a live process (and, given ``started``, the one that started then)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user
        pass
    if (fields := stat_fields(pid)) is None:  # no /proc: os.kill's word
        return True
    return fields[0] not in GONE and (started is None or len(fields) <= 19 or fields[19] == str(started))


def child_pids() -> list[int]:
    """The live direct children of this process (a joblib sweep's workers)."""
    try:
        pids = [int(e.name) for e in os.scandir(PROC) if e.name.isdigit()]
    except OSError:
        return []
    me = str(os.getpid())
    return [pid for pid in pids if (fields := stat_fields(pid)) and fields[1] == me and fields[0] not in GONE]


def ignores(pid: int, signum: int) -> bool:
    """Whether ``pid`` ignores or blocks ``signum`` (``/proc/<pid>/status``), as resource trackers do SIGINT and
    SIGTERM: waiting for them is pointless."""
    try:
        lines = (PROC / str(pid) / "status").read_text().splitlines()
    except OSError:
        return False
    bit = 1 << (int(signum) - 1)
    return any(int(line.split()[1], 16) & bit for line in lines if line.startswith(("SigIgn:", "SigBlk:")))
