"""Stopping a run or a sweep on SIGINT (Ctrl-C) or SIGTERM: within seconds, at any phase, resumable.

:func:`install` (by the sweep's Hydra callback, vitpos/run/sweep.py, while ``train.py`` runs) makes
the first SIGINT or SIGTERM a stop, not the failure of a job:

- **in the process that runs the job** it raises :class:`Stopped` at once, wherever the job is:
  compiling (``torch.compile``), training, testing, evaluating other sizes. A ``SystemExit``
  with code 128 + the signal (130, 143), not a ``KeyboardInterrupt``: it passes through every
  ``except Exception`` (Hydra's and the sweep's "record the failed job, go on with the next"),
  and Lightning hands it on unchanged (its ``KeyboardInterrupt`` path exits 1 and ignores every
  later Ctrl-C). ``last.ckpt``, written atomically at every epoch end, stays the end of the last
  finished epoch: rerunning the same command continues from there exactly, and a job that
  finished is not trained again.
- **in a sweep whose jobs run in worker processes** (``hydra/launcher=joblib``) the main process
  passes the signal on to its workers (a ``kill`` of the main process alone stops them too), waits
  until they have wound down (at most :data:`GRACE` s; joblib then kills what is left) and stops; a
  worker leaves as soon as its job has unwound.
- later signals are ignored: the stop is under way (``kill -9`` remains).
- the main process ends with one line saying how to resume, and skips the interpreter's final
  garbage collection: after ``torch.compile`` that collection alone kept a stopped process
  alive for 5-30 s.

Outside ``train.py``'s Hydra app (an in-process caller after the run, e.g. pytest) the handler
passes a signal on to the handler it replaced. Any error raised after a stop (a compiler whose
``g++`` the Ctrl-C killed) is part of the stop: :func:`stopping` tells the sweep.
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

from vitpos.run.process import child_pids, ignores, process_alive

SIGNALS = (signal.SIGINT, signal.SIGTERM)
GRACE = 3.0  # seconds a sweep's main process waits for its workers to wind down

_previous: dict[int, object] = {}  # the handlers install() replaced
_stop: int | None = None  # the signal that stopped this process
_owner = False  # this process runs train.py's Hydra app (prints the resume line), not only jobs of it
_jobs_elsewhere = False  # the sweep's launcher runs its jobs in other processes (joblib)
_exit_hook = False


class Stopped(SystemExit):
    """A stop asked for by ``signum`` (SIGINT, SIGTERM); exits with code 128 + ``signum``."""

    def __init__(self, signum: int):
        super().__init__(128 + int(signum))
        self.signum = int(signum)

    def __reduce__(self):
        return type(self), (self.signum,)


def stopping() -> int | None:
    """The signal that stopped this process, or None."""
    return _stop


def install(owner: bool = False, jobs_elsewhere: bool = False) -> None:
    """Handle SIGINT and SIGTERM as a stop (see the module docstring). ``owner``: this process
    runs the app (a single run, or a sweep's main process); ``jobs_elsewhere``: its sweep's jobs run
    in worker processes. Called again, it keeps what it knew (a sweep's main process starting a job)."""
    global _owner, _jobs_elsewhere, _exit_hook
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers belong to the main thread
    for signum in SIGNALS:
        current = signal.getsignal(signum)
        if current is not _on_signal:
            _previous[signum] = current
            signal.signal(signum, _on_signal)
    _owner, _jobs_elsewhere = _owner or owner, _jobs_elsewhere or jobs_elsewhere
    if owner and not _exit_hook:
        atexit.register(_at_exit)
        _exit_hook = True


def uninstall() -> None:
    """Put back the handlers :func:`install` replaced (the app ended without a stop)."""
    global _owner, _jobs_elsewhere
    if threading.current_thread() is not threading.main_thread():
        return
    for signum, handler in _previous.items():
        if signal.getsignal(signum) is _on_signal:
            signal.signal(signum, handler)
    _previous.clear()
    _owner = _jobs_elsewhere = False


def _on_signal(signum: int, frame) -> None:
    global _stop
    if _stop is not None:
        return  # the stop is under way
    if not in_hydra(frame, ("run_and_report", "run_job")):  # train.py's app is over: not ours
        return _pass_on(signum, frame)
    _stop = signum
    if not _owner:  # a sweep's worker process: leave once the job has unwound
        threading.Thread(target=_leave_after_job, args=(128 + signum,), daemon=True).start()
    elif _jobs_elsewhere and not in_hydra(frame, ("run_job",)):
        wind_down(signum)
    raise Stopped(signum)


def in_hydra(frame, names: tuple[str, ...]) -> bool:
    """Whether one of Hydra's functions ``names`` is on the stack of ``frame``."""
    while frame is not None:
        if frame.f_code.co_name in names and str(frame.f_globals.get("__name__", "")).startswith("hydra."):
            return True
        frame = frame.f_back
    return False


def _pass_on(signum: int, frame) -> None:
    """What the replaced handler would have done."""
    previous = _previous.get(signum, signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:  # the default action: end the process by that signal
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def wind_down(signum: int, grace: float = GRACE) -> None:
    """Pass ``signum`` on to this process's children (the sweep's workers) and wait until they
    have ended, at most ``grace`` seconds. Children that ignore it (resource trackers) are left."""
    children = [pid for pid in child_pids() if not ignores(pid, signum)]
    for pid in children:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while any(process_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.05)


def _leave_after_job(code: int) -> None:
    """A worker process: end it once its stopped job has left Hydra's ``run_job`` (the run has
    released its folder and said where it stopped), so that the main process need not wait longer."""
    main = threading.main_thread().ident
    while in_hydra(sys._current_frames().get(main), ("run_job",)):
        time.sleep(0.05)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _at_exit() -> None:
    """The main process, stopped: one line on how to resume; no final garbage collection."""
    if _stop is None:
        return
    gc.freeze()  # the objects alive now are never collected: the interpreter's last collection is empty
    name = signal.Signals(_stop).name
    command = shlex.join(["python", *sys.argv])
    sys.stdout.write(f"stopped by {name}. To resume, run the same command again: {command}\n")
    sys.stdout.flush()
