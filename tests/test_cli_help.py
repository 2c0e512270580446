"""Help pages and the console of a real run, through the command line (issue 13)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vitpos.encodings import list_encodings

ROOT = Path(__file__).resolve().parents[1]


def run(args, cwd, merged=False):
    """The command's result; ``merged``: stderr into stdout, unbuffered, in the order printed."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    streams = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT} if merged else {"capture_output": True}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, text=True, timeout=900, **streams)


def test_train_help_lists_encodings_by_kind(tmp_path):
    proc = run([str(ROOT / "train.py"), "--help"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    images, sequences = text.split("images (2D grids):")[1].split("sequences (1D):")
    listed = lambda part: {m for m in re.findall(r"^    (\w+) ", part, re.M)}  # noqa: E731
    assert listed(images) == set(list_encodings(2))
    assert listed(sequences.split("==")[0]) == set(list_encodings(1))
    for section in ("Run", "Encodings", "Compare encodings"):
        assert f'"{section}"' in text and f"## {section}" in (ROOT / "README.md").read_text()
    assert list(tmp_path.iterdir()) == []  # --help writes nothing (no outputs/)


@pytest.mark.parametrize("tool", ["compare", "extrapolate", "viz"])
def test_tool_help_has_a_right_usage_line(tool, tmp_path):
    proc = run(["-m", f"vitpos.{tool}", "--help"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    head = "\n".join(proc.stdout.splitlines()[:5])
    assert re.search(rf"(^|[\s`])python -m vitpos\.{tool}[\s`]", head), proc.stdout


@pytest.mark.slow
def test_quiet_console_and_next_commands(tmp_path):
    """Fewer than 10 lines before the first progress bar, no Hydra outputs/
    folder, the run's name in the bar, the commands to look next at the end;
    the same command again finds the same folder."""
    args = [str(ROOT / "train.py"), "data=shapes", "model=vit_micro", "trainer.max_epochs=1", "data.num_train=256"]
    args += ["data.val_size=64", "data.num_test=64", "eval.resolutions=[32]", f"run.root={tmp_path / 'runs'}"]
    proc = run(args, tmp_path, merged=True)
    assert proc.returncode == 0, proc.stdout
    lines = proc.stdout.splitlines()
    first_bar = next(i for i, line in enumerate(lines) if line.startswith("Epoch 0"))
    assert first_bar < 10, "\n".join(lines[:first_bar])
    head = "\n".join(lines[: first_bar + 2])
    assert "v_num" not in head and "sincos_2d/seed0" in head and "litlogger" not in head and "LeafSpec" not in head
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]  # no outputs/
    folder = re.search(r"run folder: (\S+)", proc.stdout).group(1)
    for command in ("tensorboard --logdir", "vitpos.compare", "vitpos.extrapolate ckpt=", "vitpos.viz ckpt="):
        assert command in proc.stdout
    again = run(args, tmp_path, merged=True)
    assert again.returncode == 0 and f"run folder: {folder}" in again.stdout
