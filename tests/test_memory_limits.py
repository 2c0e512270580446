"""Memory estimates respect the process's limits, not only the machine's RAM (issue 19):
``ulimit -v`` (RLIMIT_AS) and the cgroup memory limit lower what a run may plan to use."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT

import vitpos.runtime as runtime


def test_address_space_limit_lowers_the_budget(monkeypatch):
    monkeypatch.setattr(runtime, "address_space_limit", lambda: 3 << 30)
    monkeypatch.setattr(runtime, "cgroup_limit", lambda: (None, None))
    assert runtime.memory_limit() == 3 << 30


def test_cgroup_limit_lowers_the_budget_and_what_is_free(monkeypatch):
    monkeypatch.setattr(runtime, "address_space_limit", lambda: None)
    monkeypatch.setattr(runtime, "cgroup_limit", lambda: (2 << 30, 1 << 30))
    assert runtime.memory_limit() == 2 << 30
    assert runtime.available_memory("cpu") <= 1 << 30  # limit - usage


def test_the_config_check_refuses_what_ulimit_forbids(tmp_path):
    """Through the command line, under `ulimit -v`: an evaluation size that fits the machine's RAM
    but not the process's address space is refused up front, naming the limit."""
    if sys.platform != "linux":
        pytest.skip("RLIMIT_AS semantics tested on Linux only")
    import resource

    from test_bad_input import composed_error

    # a 112-px evaluation batch's attention takes 4.7 GiB: within a quarter of 24 GiB of RAM, not of 12 GiB
    limit = 12 << 30  # enough to import torch
    if runtime.memory_limit() < 4 * 4.8 * 2**30:
        pytest.skip("this machine has too little memory to tell RAM and ulimit apart")
    args = ["data=shapes", "model=vit_micro", "eval.resolutions=[32,112]", f"run.root={tmp_path / 'R'}"]
    assert composed_error(args) is None  # accepted without the ulimit
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)),
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "eval.resolutions" in proc.stderr and "ulimit -v" in proc.stderr, proc.stderr
    assert "12 GiB this process may use" in proc.stderr, proc.stderr
