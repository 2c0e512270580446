"""Faults at the disk, with real limits: a checkpoint or ``metrics.json`` write that fails part-way
leaves the files before it intact and the run resumable, the user gets one line naming the path
and the cause, and rerunning the same command once the fault is gone ends with the metrics of a
run that never met it.

The limits are real, not mocks:

- **no space left** (ENOSPC): the run's ``run.root`` on a tmpfs of about two checkpoints
  (``mount -t tmpfs -o size=...``): epoch 0 fits, epoch 1's checkpoint does not; "freeing space"
  is ``mount -o remount,size=...``. For ``metrics.json``, the same tmpfs filled up by a ballast
  file just before the write (the only injected step: the write itself meets a really full disk);
- **the file-size limit** (``ulimit -f``: RLIMIT_FSIZE, SIGXFSZ ignored, so a write gets EFBIG): a
  real ``python train.py`` process whose limit the test lowers with ``prlimit`` once its first
  ``last.ckpt`` exists (the process is the point here: a limit applies to a process);
- **a read-only run folder** (EROFS): the tmpfs remounted read-only (``chmod`` would not do: the
  suite runs as root in CI, and root writes through a mode of 0555).

tmpfs needs ``mount`` (root with CAP_SYS_ADMIN); where the machine refuses it, those tests skip and
say so, and the file-size test, which needs no privilege, still runs.
"""

from __future__ import annotations

import json
import math
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch
from conftest import ROOT, TINY_SHAPES_RUN, finished_run, run_command

# a run of a few seconds: two epochs, so that a fault at epoch 1 leaves epoch 0 to continue from
TINY = [*TINY_SHAPES_RUN, "trainer.max_epochs=2"]
pytestmark = pytest.mark.slow  # short real trainings

#: what a rerun must reproduce exactly (CPU: exact resume, tests/test_resume.py); time/* differ
COMPARED = ("test/acc", "test/loss", "val/acc_best")


def mount_refusal() -> str | None:
    """None when this process can mount a tmpfs (and unmount it), else why not."""
    with tempfile.TemporaryDirectory() as where:
        try:
            done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", where], capture_output=True)
        except OSError as err:
            return f"no mount command ({err})"
        if done.returncode != 0:
            return done.stderr.decode(errors="replace").strip() or f"mount exited {done.returncode}"
        subprocess.run(["umount", where], check=True)
    return None


MOUNT_REFUSED = mount_refusal()
needs_mount = pytest.mark.skipif(
    MOUNT_REFUSED is not None,
    reason=f"needs `mount -t tmpfs` (root with CAP_SYS_ADMIN) for a real full or read-only disk; "
    f"refused here: {MOUNT_REFUSED}. The file-size-limit test (ulimit -f) ran instead",
)


def mount(where: Path, options: str) -> None:
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], check=True)


def remount(where: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(where)], check=True)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[dict, int]:
    """(metrics, checkpoint size in bytes) of the $TINY run that met no fault."""
    folder = finished_run(tmp_path_factory.mktemp("reference") / "R", *TINY)
    metrics = json.loads((folder / "metrics.json").read_text())["metrics"]
    return metrics, (folder / "checkpoints" / "last.ckpt").stat().st_size


def assert_same_metrics(folder: Path, reference: dict) -> None:
    got = json.loads((folder / "metrics.json").read_text())["metrics"]
    for key in COMPARED:
        assert math.isclose(got[key], reference[key], rel_tol=0, abs_tol=1e-6), (key, got[key], reference[key])


def one_error_line(ran, path_part: str, cause: str) -> str:
    """Exit code 2, no traceback, exactly one ``error: disk: cannot write <path>: ...`` line."""
    out = ran.out + ran.err
    assert ran.code == 2, out
    assert "Traceback" not in out, out
    errors = [line for line in ran.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, out
    assert errors[0].startswith("error: disk: cannot write ") and path_part in errors[0] and cause in errors[0], out
    return errors[0]


def run_folder(root: Path) -> Path:
    (lock_or_ckpt,) = {p.parent.parent for p in root.rglob("last.ckpt")}
    return lock_or_ckpt


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def assert_resumable_at_epoch_0(folder: Path) -> None:
    """``last.ckpt`` loads and holds the end of epoch 0; no temporary file and no torn checkpoint
    of epoch 1 is left; no ``metrics.json`` (the run did not finish)."""
    last = torch.load(folder / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert last["epoch"] == 0
    names = sorted(p.name for p in (folder / "checkpoints").iterdir())
    assert names == ["best-epoch001.ckpt", "last.ckpt"], names
    assert not list(folder.rglob("*.tmp")) and not (folder / "metrics.json").exists()


def fill_at_epoch_1(tmpfs: Path, reference) -> tuple[Path, object]:
    """Run $TINY on a tmpfs with room for two checkpoints: epoch 1's write meets a full disk."""
    size = reference[1]
    mount(tmpfs, f"size={2 * size + 600_000}")
    ran = run_command("train.py", *TINY, f"run.root={tmpfs / 'R'}", cwd=tmpfs.parent)
    return tmpfs / "R", ran


@needs_mount
def test_no_space_left_for_a_checkpoint(tmpfs, reference):
    root, ran = fill_at_epoch_1(tmpfs, reference)
    one_error_line(ran, "/checkpoints/", "no space left on the device [ENOSPC]")
    folder = run_folder(root)
    assert_resumable_at_epoch_0(folder)
    remount(tmpfs, "size=64m")  # space freed
    again = run_command("train.py", *TINY, f"run.root={root}", cwd=tmpfs.parent)
    assert again.code == 0, again.out + again.err
    assert_same_metrics(folder, reference[0])


@needs_mount
def test_a_read_only_run_folder(tmpfs, reference):
    """The partial run of the test above, its disk then remounted read-only: the rerun names the
    path and the cause and changes nothing; read-write again, it continues to the same metrics."""
    root, ran = fill_at_epoch_1(tmpfs, reference)
    assert ran.code == 2, ran.out + ran.err
    folder = run_folder(root)
    before = snapshot(folder)
    remount(tmpfs, "size=64m,ro")
    refused = run_command("train.py", *TINY, f"run.root={root}", cwd=tmpfs.parent)
    one_error_line(refused, str(folder), "read-only file system [EROFS]")
    assert snapshot(folder) == before
    remount(tmpfs, "size=64m,rw")
    again = run_command("train.py", *TINY, f"run.root={root}", cwd=tmpfs.parent)
    assert again.code == 0, again.out + again.err
    assert_same_metrics(folder, reference[0])


@needs_mount
def test_no_space_left_for_metrics_json(tmpfs, reference, monkeypatch):
    """The disk fills up just before ``metrics.json`` is written (a ballast file written until the
    disk says ENOSPC; the write of metrics.json itself is real): one line naming metrics.json, no
    torn or temporary file, and the rerun, space freed, tests the finished checkpoints again and
    writes the same metrics."""
    import vitpos.train

    mount(tmpfs, "size=16m")
    ballast = tmpfs / "ballast"
    real_write = vitpos.train.write_status

    def fill_then_write(folder, status, *args, **kw):
        with open(ballast, "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
            except OSError:
                pass
        return real_write(folder, status, *args, **kw)

    monkeypatch.setattr(vitpos.train, "write_status", fill_then_write)
    ran = run_command("train.py", *TINY, f"run.root={tmpfs / 'R'}", cwd=tmpfs.parent)
    one_error_line(ran, "metrics.json", "[ENOSPC]")
    monkeypatch.undo()
    folder = run_folder(tmpfs / "R")
    assert not (folder / "metrics.json").exists() and not list(folder.rglob("*.tmp"))
    assert torch.load(folder / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)["epoch"] == 1
    ballast.unlink()  # space freed
    again = run_command("train.py", *TINY, f"run.root={tmpfs / 'R'}", cwd=tmpfs.parent)
    assert again.code == 0, again.out + again.err
    assert_same_metrics(folder, reference[0])


def ignore_sigxfsz() -> None:
    """In the child before exec: SIGXFSZ ignored (inherited through exec), so a write past the
    limit returns EFBIG instead of killing the process."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def test_file_size_limit_for_a_checkpoint(tmp_path, reference):
    """``ulimit -f`` below a checkpoint's size, set on a real ``python train.py`` once its epoch 0
    is saved (``prlimit``): epoch 1's checkpoint write gets EFBIG."""
    root = tmp_path / "R"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(ROOT / "train.py"), *TINY, f"run.root={root}"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=ignore_sigxfsz)  # fmt: skip
    limit = reference[1] // 2
    deadline = time.monotonic() + 240
    while not list(root.rglob("last.ckpt")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    if proc.poll() is None:
        resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (limit, limit))
    out, err = proc.communicate(timeout=240)
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert proc.returncode == 2 and len(errors) == 1, out + err
    assert "Traceback" not in err, err
    assert "/checkpoints/" in errors[0] and "file-size limit (ulimit -f) [EFBIG]" in errors[0], errors[0]
    folder = run_folder(root)
    assert_resumable_at_epoch_0(folder)
    again = run_command("train.py", *TINY, f"run.root={root}", cwd=tmp_path)  # no limit: this process's
    assert again.code == 0, again.out + again.err
    assert_same_metrics(folder, reference[0])


@needs_mount
def test_no_space_left_for_the_decoded_data_cache_warns_and_the_run_goes_on(tmpfs):
    """The decoded-data cache is an optimisation: a full disk costs the next run a decode, never
    this run. ``torch.save`` reports a failed write as a RuntimeError, not an OSError."""
    from vitpos.data import tensor_cache

    mount(tmpfs, "size=1m")
    tensors = {"images": torch.zeros(4 * 2**20, dtype=torch.uint8)}  # 4 MiB into 1 MiB
    with pytest.warns(RuntimeWarning, match="could not write the decoded-data cache"):
        tensor_cache.save(tmpfs / "cache.pt", "fingerprint", tensors)
    assert list(tmpfs.iterdir()) == []  # no partial file, no temporary one
