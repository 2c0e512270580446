"""Stopping a run or a sweep on SIGINT (Ctrl-C) or SIGTERM: within seconds, at any phase, resumable.

The first signal raises :class:`Stopped`, a ``SystemExit`` (128 + signal) that passes every ``except Exception`` and
that Lightning re-raises; ``last.ckpt`` stays at the last finished epoch, so the same command resumes. Joblib workers
get the signal forwarded, later signals are ignored; outside train.py's app (:func:`app`, :func:`job_running`) the
replaced handler acts.
"""

from __future__ import annotations

import atexit
import gc
import os
import shlex
import signal
import sys
import threading
import time
from contextlib import contextmanager, suppress

from vitpos.run.process import child_pids, ignores, process_alive

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_previous: dict[int, object] = {}  # handlers replaced by install()
_stop: int | None = None  # the signal that stopped this process
_owner = False  # this process runs train.py's app (prints the resume line)
_jobs_elsewhere = False  # jobs run in worker processes (joblib)
_in_app = False  # train.py's Hydra app runs in this process (vitpos.command.main)
_in_job = False  # a job runs in this process: from Hydra's on_job_start to the task function's end


class Stopped(SystemExit):
    """A stop asked for by ``signum`` (SIGINT, SIGTERM); exits with code 128 + ``signum``."""

    def __init__(self, signum: int):
        super().__init__(128 + int(signum))
        self.signum = int(signum)

    def __reduce__(self):
        return type(self), (self.signum,)


def stopping() -> int | None:
    """The signal that stopped this process, or None (an error after a stop, e.g. a killed ``g++``, is the stop's)."""
    return _stop


def raise_if_stopped() -> None:
    if _stop is not None:
        raise Stopped(_stop)


def install(owner: bool = False, jobs_elsewhere: bool = False) -> None:
    """Handle SIGINT and SIGTERM as a stop (main thread only); ``owner``: this process runs the app, ``jobs_elsewhere``:
    its jobs run in worker processes (kept from an earlier call)."""
    global _owner, _jobs_elsewhere
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in SIGNALS:
        if (current := signal.getsignal(signum)) is not _on_signal:
            _previous[signum] = current
            signal.signal(signum, _on_signal)
    _owner, _jobs_elsewhere = _owner or owner, _jobs_elsewhere or jobs_elsewhere
    if owner:
        atexit.unregister(_at_exit)  # once, however often a process runs the app
        atexit.register(_at_exit)


def uninstall() -> None:
    """Restore the handlers :func:`install` replaced."""
    global _owner, _jobs_elsewhere
    if threading.current_thread() is threading.main_thread():
        for signum, handler in _previous.items():
            if signal.getsignal(signum) is _on_signal:
                signal.signal(signum, handler)
        _previous.clear()
        _owner = _jobs_elsewhere = False


def _on_signal(signum: int, frame) -> None:
    global _stop
    if _stop is not None:
        return  # the stop is under way
    if not (_in_app or _in_job):  # outside train.py's app: what the replaced handler would have done
        previous = _previous.get(signum, signal.SIG_DFL)
        if callable(previous):
            return previous(signum, frame)
        if previous != signal.SIG_IGN:  # the default action: end the process by that signal
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)
        return
    _stop = signum
    if not _owner:  # a worker: exit once the job has unwound
        threading.Thread(target=_leave_after_job, args=(128 + signum,), daemon=True).start()
    elif _jobs_elsewhere and not _in_job:
        wind_down(signum)
    raise Stopped(signum)


@contextmanager
def app():
    """The span of ``train.py``'s Hydra app in this process: a signal inside it stops the run or sweep."""
    global _in_app
    outer, _in_app = _in_app, True
    try:
        yield
    finally:
        _in_app = outer


def job_running(running: bool) -> None:
    """A job starts (Hydra's ``on_job_start``; in a worker, the only sign of the app) or ends, however it ended."""
    global _in_job
    _in_job = running


def wind_down(signum: int, grace: float = 3.0) -> None:
    """Forward ``signum`` to the children that do not ignore it (not resource trackers); wait ``grace`` s for them."""
    children = [pid for pid in child_pids() if not ignores(pid, signum)]
    for pid in children:
        with suppress(ProcessLookupError):
            os.kill(pid, signum)
    deadline = time.monotonic() + grace
    while any(process_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.05)


def _leave_after_job(code: int) -> None:
    """Exit this worker once its stopped job has unwound (checkpoints and folder released)."""
    while _in_job:
        time.sleep(0.05)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _at_exit() -> None:
    """After a stop: print how to resume; skip the last garbage collection (5-30 s after ``torch.compile``)."""
    if _stop is not None:
        gc.freeze()
        command = shlex.join(["python", *sys.argv])
        print(f"stopped by {signal.Signals(_stop).name}. To resume, run the same command again: {command}", flush=True)
