"""The tools never run code from a checkpoint: a crafted pickle is
refused by ``extrapolate``, ``viz``, ``export`` and ``compare``, in process and on the command line."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from ckpt_factory import IMAGE, make_checkpoint, make_evil_checkpoint
from conftest import ROOT

from vitpos.compare import compare
from vitpos.export.cli import main as export_main
from vitpos.extrapolate.checkpoints import main as extrapolate_main
from vitpos.run.checkpoint import CheckpointError, load_checkpoint
from vitpos.viz.__main__ import main as viz_main


@pytest.fixture
def evil(tmp_path):
    marker = tmp_path / "marker"
    return make_evil_checkpoint(tmp_path / "runs" / "shapes" / "evil" / "seed0", marker), marker


@pytest.mark.slow
def test_the_crafted_checkpoint_does_run_code_when_fully_unpickled(tmp_path):
    """The control: without weights_only such a file runs its command, so the refusals below mean something."""
    control = tmp_path / "control"
    ckpt = make_evil_checkpoint(tmp_path / "control_run", control)
    code = f"import torch; torch.load({str(ckpt)!r}, weights_only=False)"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=False, capture_output=True, timeout=120)
    assert control.exists()


def test_load_checkpoint_refuses_it(evil):
    ckpt, marker = evil
    with pytest.raises(CheckpointError, match="refused"):
        load_checkpoint(ckpt)
    assert not marker.exists()


@pytest.mark.parametrize("given", ["folder", "pattern"])
def test_extrapolate_refuses_it_and_goes_on(evil, tmp_path, capsys, given):
    ckpt, marker = evil
    make_checkpoint(tmp_path / "runs" / "shapes" / "good" / "seed0", *IMAGE)
    out = tmp_path / "out"
    where = tmp_path / "runs" if given == "folder" else f"{tmp_path}/runs/shapes/*/seed0/checkpoints/last.ckpt"
    code = extrapolate_main([f"ckpt={where}", "resolutions=[16,32]", "strategies=default", f"out={out}",
                             "device=cpu"])  # fmt: skip
    assert code == 1 and not marker.exists()
    err = capsys.readouterr().err
    assert f"ckpt={ckpt}: refused" in err
    assert (out / "extrapolation.csv").read_text().count("good/seed0") == 2  # the good run was evaluated


def test_viz_refuses_it(evil, tmp_path):
    ckpt, marker = evil
    with pytest.raises(CheckpointError, match="refused"):
        viz_main([f"ckpt={ckpt}", f"out={tmp_path / 'viz'}"])
    assert not marker.exists() and not (tmp_path / "viz").exists()


def test_export_refuses_it_and_writes_nothing(evil, tmp_path):
    ckpt, marker = evil
    out = tmp_path / "export" / "model.onnx"
    with pytest.raises(CheckpointError, match="refused"):
        export_main([f"ckpt={ckpt}", f"out={out}"])
    assert not marker.exists() and not out.exists()


def test_compare_never_unpickles_checkpoints(evil, tmp_path):
    ckpt, marker = evil
    (ckpt.parent / "best-epoch000.ckpt").write_bytes(ckpt.read_bytes())
    result = compare(tmp_path / "runs", tmp_path / "report")
    assert not marker.exists()
    assert list(result.runs["status"]) == ["failed"]  # listed (no scalars), not dropped


@pytest.mark.slow
@pytest.mark.parametrize("tool, out", [("vitpos.extrapolate", "out"), ("vitpos.viz", "out"),
                                       ("vitpos.export", "out.onnx")])  # fmt: skip
def test_command_line_refuses_it_in_one_line(evil, tmp_path, tool, out):
    ckpt, marker = evil
    pattern = f"{tmp_path}/runs/shapes/ev*/seed0/checkpoints/last.ckpt"  # bash leaves it alone inside key=value
    result = subprocess.run([sys.executable, "-m", tool, f"ckpt={pattern}", f"out={tmp_path / out}"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode != 0 and not marker.exists()
    assert "refused" in result.stderr and "Traceback" not in result.stderr + result.stdout
    assert not (tmp_path / out).exists()


def test_truncated_and_foreign_files_name_the_file(tmp_path):
    good = make_checkpoint(tmp_path / "run", *IMAGE)
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes(good.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="truncated.ckpt: not a readable checkpoint"):
        load_checkpoint(truncated)
    foreign = tmp_path / "weights.pt"
    torch.save({"weight": torch.zeros(2)}, foreign)
    with pytest.raises(CheckpointError, match="weights.pt: not a vitpos checkpoint"):
        load_checkpoint(foreign)
    with pytest.raises(CheckpointError, match="no such file"):
        load_checkpoint(tmp_path / "missing.ckpt")
