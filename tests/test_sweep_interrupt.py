"""Stopping a sweep: SIGINT (Ctrl-C) or SIGTERM stops ``python train.py -m ...`` within seconds
in every phase (compile, train, evaluate), says how to resume, and the rerun ends with the metrics
of a sweep that never stopped; a lock left by ``kill -9`` does not block the rerun
(vitpos/run/signals.py, vitpos/run/folder.py).

Real processes: a signal is the point. Ctrl-C reaches the whole foreground process group (the
sweep, its joblib workers, a compiler's g++), so SIGINT goes to the sweep's process group; the
SIGTERM of a scheduler or ``kill PID`` reaches the main process alone. Each test waits for the
line that says the phase has begun (an epoch line, the evaluation's progress bar, dynamo's
"calling compiler function inductor" with ``TORCH_LOGS=dynamo``) instead of sleeping.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import ROOT, run_command

from vitpos.run import folder as run_folder
from vitpos.run import process, signals

SWEEP = [
    "data=shapes",
    "model=vit_micro",
    "data.num_train=256",
    "data.num_test=512",  # an evaluation of a second or more: room to land a signal in it
    "data.val_size=64",
    "data.batch_size=64",
    "trainer.max_epochs=2",
    "trainer.enable_progress_bar=false",
    "task.pictures=false",
    "eval.resolutions=[24,48]",
    "seed=0,1",  # two jobs
]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
RESUME = "To resume, run the same command again"
# the promise is "within a few seconds" (measured 0.4-1.8 s at a load average of 5 on 2 cores); the
# bound catches a hang, with room for a CI machine running two test workers beside the sweep
STOP_SECONDS = 15


class Running:
    """``python train.py ARGS`` in its own process group (as a shell runs it), its stdout and
    stderr read as they come (progress bars end their lines with ``\\r``, not ``\\n``)."""

    def __init__(self, args: list[str], cwd: Path, env: dict | None = None):
        cwd.mkdir(parents=True, exist_ok=True)
        self.cwd = cwd
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "train.py"), *args],
            cwd=cwd,
            env=env or ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.text, self.pos, self.sent = "", 0, None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while chunk := self.proc.stdout.read1(4096):
            self.text += chunk.decode(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 300) -> None:
        """Until ``pattern`` appears after the previous match."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.compile(pattern).search(self.text, self.pos)
            if found:
                self.pos = found.end()
                return
            assert self.proc.poll() is None, f"ended before {pattern!r}:\n{self.text[-3000:]}"
            time.sleep(0.02)
        raise AssertionError(f"no {pattern!r} within {timeout} s:\n{self.text[-3000:]}")

    def send(self, signum: int, group: bool = True) -> None:
        self.sent = time.monotonic()
        os.killpg(self.proc.pid, signum) if group else self.proc.send_signal(signum)

    def finish(self, timeout: float = 300) -> tuple[int, float]:
        """(exit code, seconds from the signal to the exit)."""
        code = self.proc.wait(timeout=timeout)
        stopped = time.monotonic() - self.sent if self.sent is not None else 0.0
        self.reader.join(timeout=10)
        return code, stopped


def scores(root: Path) -> dict[str, dict]:
    """Each run's final metrics by seed folder, without the minutes (time/*), which differ by nature."""
    found = {}
    for path in sorted(root.rglob("metrics.json")):
        body = json.loads(path.read_text())
        assert body["status"] == "complete", body
        found[path.parent.name] = {k: v for k, v in body["metrics"].items() if not k.startswith("time/")}
    return found


def sweep_in_process(root: Path, cwd: Path, *extra: str) -> None:
    """``python train.py -m SWEEP EXTRA run.root=ROOT`` run from ``cwd`` (where ``multirun/`` goes)."""
    cwd.mkdir(parents=True, exist_ok=True)
    ran = run_command("train.py", "-m", *SWEEP, *extra, f"run.root={root}", cwd=cwd)
    assert ran.code == 0, ran.out + ran.err


def uninterrupted(root: Path, *extra: str) -> dict[str, dict]:
    sweep_in_process(root, root.parent / "reference-cwd", *extra)
    return scores(root)


def assert_stopped(run: Running, code: int, seconds: float, signum: int) -> None:
    assert code == 128 + signum, run.text[-3000:]
    assert seconds < STOP_SECONDS, f"stopped after {seconds:.1f} s"
    resume = [line for line in run.text.splitlines() if RESUME in line]
    assert len(resume) == 1 and f"stopped by {signal.Signals(signum).name}" in resume[0], run.text[-3000:]
    assert "Traceback (most recent call last)" not in run.text, run.text[-3000:]
    sweeps = list(run.cwd.glob("multirun/*/*"))
    assert sweeps and not list(sweeps[0].glob("*/error.log")), "a stop was recorded as a failed job"


def rerun_matches(root: Path, reference: dict, *extra: str) -> None:
    sweep_in_process(root, root.parent / "rerun-cwd", *extra)
    assert scores(root) == reference and len(reference) == 2


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, dict]:
    """The metrics of the sweep, run without a stop."""
    return uninterrupted(tmp_path_factory.mktemp("reference") / "runs")


def start(tmp_path: Path, *extra: str, env: dict | None = None) -> Running:
    return Running(["-m", *SWEEP, *extra, f"run.root={tmp_path / 'runs'}"], tmp_path / "stopped-cwd", env)


@pytest.mark.slow
@pytest.mark.parametrize(
    "phase, marks",
    [
        ("train", [r"\[job 1\] start", r"seed1: epoch 1/2"]),  # the second job, after its first epoch
        ("evaluate", [r"\[job 1\] start", r"test at resolution 48"]),  # the second job, at the second size
        ("train, first job", [r"seed0: epoch 1/2"]),  # the sweep's second job never started
    ],
)
def test_ctrl_c_stops_the_sweep_and_the_rerun_ends_as_an_uninterrupted_sweep(tmp_path, reference, phase, marks):
    run = start(tmp_path)
    for mark in marks:
        run.wait_for(mark)
    run.send(signal.SIGINT)
    code, seconds = run.finish()
    assert_stopped(run, code, seconds, signal.SIGINT)
    assert not list((tmp_path / "runs").rglob(run_folder.LOCK)), "a stopped run kept its lock"
    rerun_matches(tmp_path / "runs", reference)


@pytest.mark.slow
def test_ctrl_c_while_torch_compile_compiles(tmp_path):
    """Ctrl-C also reaches the compiler's processes (g++): their failure is the stop's, not the job's."""
    reference = uninterrupted(tmp_path / "reference" / "runs", "model.compile=true")
    run = start(tmp_path, "model.compile=true", env={**ENV, "TORCH_LOGS": "dynamo"})
    run.wait_for(r"calling compiler function inductor")  # job 0's (job 1 in the same process reuses its graph)
    run.send(signal.SIGINT)
    code, seconds = run.finish()
    assert_stopped(run, code, seconds, signal.SIGINT)
    rerun_matches(tmp_path / "runs", reference, "model.compile=true")


@pytest.mark.slow
def test_sigterm_to_a_joblib_sweeps_main_process_stops_its_workers(tmp_path, reference):
    """``kill PID`` reaches the main process alone: it passes the stop on to its joblib workers."""
    joblib = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    run = start(tmp_path, *joblib)
    run.wait_for(r"seed\d: epoch 1/2")
    workers = [pid for pid in all_children(run.proc.pid) if b"LokyProcess" in cmdline(pid)]
    assert len(workers) == 2
    run.send(signal.SIGTERM, group=False)
    code, seconds = run.finish()
    assert_stopped(run, code, seconds, signal.SIGTERM)
    assert not [pid for pid in workers if process.process_alive(pid)], "a worker outlived the sweep"
    rerun_matches(tmp_path / "runs", reference, *joblib)


@pytest.mark.slow
def test_a_run_killed_with_sigkill_leaves_a_stale_lock_that_the_rerun_takes_over(tmp_path, reference):
    run = start(tmp_path)
    run.wait_for(r"seed0: epoch 1/2")
    run.send(signal.SIGKILL)
    run.finish()
    (lock,) = (tmp_path / "runs").rglob(run_folder.LOCK)
    assert json.loads(lock.read_text())["pid"] == run.proc.pid  # what `kill -9` leaves behind
    rerun_matches(tmp_path / "runs", reference)
    assert not lock.exists()


def all_children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (``process.child_pids`` answers for this process only)."""
    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    return [child for child in pids if (process.stat_fields(child) or ["", ""])[1] == str(pid)]


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


# ------------------------------------------------------------------ fast: the parts on their own
def test_a_lock_whose_process_id_now_names_another_process_is_taken_over(tmp_path):
    """The pid of a killed run can be reused; the lock records when its process started."""
    holder = os.getppid()  # alive, but not the process that took this lock
    body = {"pid": holder, "started": (process.start_time(holder) or 0) + 1, "host": run_folder.socket.gethostname()}
    (tmp_path / run_folder.LOCK).write_text(json.dumps(body))
    run_folder.acquire(tmp_path)
    taken = run_folder.read_lock(tmp_path)
    assert taken["pid"] == os.getpid() and taken["started"] == process.start_time(os.getpid())
    body["started"] -= 1  # the same process: still in use
    (tmp_path / run_folder.LOCK).write_text(json.dumps(body))
    with pytest.raises(ValueError, match=f"in use by process {holder}"):
        run_folder.acquire(tmp_path)


def test_a_killed_child_not_yet_reaped_is_not_alive():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert process.process_alive(child.pid) and child.pid in process.child_pids()
        child.kill()
        deadline = time.monotonic() + 10
        while process.process_alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not process.process_alive(child.pid), "a zombie counted as alive"  # not reaped yet: no wait()
    finally:
        child.kill()
        child.wait()


def test_outside_train_pys_app_a_signal_goes_to_the_handler_it_replaced():
    """An in-process caller (pytest after main(argv)) keeps its Ctrl-C: a KeyboardInterrupt."""
    saved = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (an xdist worker ignores SIGINT)
    try:
        signals.install()
        assert signal.getsignal(signal.SIGINT) is signals._on_signal
        with pytest.raises(KeyboardInterrupt):
            signals._on_signal(signal.SIGINT, sys._getframe())
        assert signals.stopping() is None
        signals.uninstall()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signals.uninstall()
        signal.signal(signal.SIGINT, saved)


def test_a_stop_exits_with_128_plus_the_signal_and_survives_pickling():
    import pickle

    stop = pickle.loads(pickle.dumps(signals.Stopped(signal.SIGTERM)))
    assert isinstance(stop, SystemExit) and stop.code == 143 and stop.signum == signal.SIGTERM
    assert not isinstance(stop, Exception)  # passes every `except Exception` (a failed job's handler)
