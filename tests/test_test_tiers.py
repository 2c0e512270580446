"""The tier rule of CONTRIBUTING.md, as tests/conftest.py enforces it: a fast test that starts the project's
code in another process fails; placeholders, compilers and system tools do not count."""

import subprocess
import sys

import pytest
from conftest import starts_project_code


@pytest.mark.parametrize(
    "args",
    [
        [sys.executable, "train.py", "data=shapes"],
        [sys.executable, "-m", "vitpos.compare", "--help"],
        [sys.executable, "-c", "import vitpos"],
        ["torchrun", "--nproc-per-node=2", "train.py"],
        "bash scripts/gpu_sweep.sh",
    ],
)
def test_a_command_that_runs_the_project_counts(args):
    assert starts_project_code(args)


@pytest.mark.parametrize(
    "args",
    [
        [sys.executable, "-c", "import time; time.sleep(60)"],
        [sys.executable, "-c", "import torch; from ctypes import cdll"],  # inductor's check of a compiled kernel
        [sys.executable, "-m", "torch._inductor.compile_worker"],
        ["g++", "--version"],
        ["mount", "-t", "tmpfs"],
    ],
)
def test_placeholders_and_system_tools_do_not(args):
    assert not starts_project_code(args)


def test_a_fast_test_that_starts_one_fails():
    with pytest.raises(pytest.fail.Exception, match="mark it @pytest.mark.slow"):
        subprocess.run([sys.executable, "-c", "import vitpos"], check=False)
