"""The GPU comparison on a CPU at a tiny size: ``bash scripts/gpu_sweep.sh`` runs
``experiment=compare_cifar_gpu`` (joblib jobs side by side, data kept on the training device) and
writes the report, through the same code a GPU run takes; only the device, precision, compile
and sizes are overridden. Without a GPU and without that explicit ``trainer.accelerator=cpu``, the
script refuses before it starts anything."""

import json
import os
import subprocess

import pytest
from conftest import ROOT, require_cifar

from vitpos.data.images import ImageDataModule

TINY = [
    "trainer.accelerator=cpu", "trainer.precision=32-true", "model.compile=false",  # what a CPU cannot do as on a GPU
    "model.dim=32", "model.depth=2", "model.num_heads=2", "encoding=none,rope_2d", "hydra.launcher.n_jobs=2",
    "trainer.max_epochs=1", "trainer.check_val_every_n_epoch=1", "+trainer.limit_train_batches=2",
    "+trainer.limit_val_batches=1", "data.train_subset=1024", "data.test_subset=256", "eval.test_subset=null",
    "eval.resolutions=[16,32]", "data.eval_batch_size=256",
]  # fmt: skip


@pytest.mark.slow
def test_gpu_sweep_script_runs_every_job_and_writes_the_report(tmp_path):
    cifar = require_cifar()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [*TINY, f"data.root={cifar}", f"run.root={tmp_path}"]
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_sweep.sh"), *args], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    metrics = sorted((tmp_path / "compare_cifar_gpu").glob("vit_lite7/*/seed0/metrics.json"))
    assert [m.parents[1].name.split("-")[0] for m in metrics] == ["none", "rope_2d"], out[-2000:]
    for m in metrics:
        values = json.loads(m.read_text())["metrics"]
        assert {"test/acc", "test/acc_flip", "test/acc@res16", "test/acc@res32"} <= set(values)
    report = (tmp_path / "compare_cifar_gpu" / "report" / "report.md").read_text()
    assert "rope_2d" in report and "none" in report
    assert "gpu sweep:" in out
    # side by side, each job prints only labelled lines: the sweep's start/end lines and its epoch lines
    assert out.count("] start: ") == 2 and out.count("] end after ") == 2, out[-3000:]
    assert "GPU available" not in out and "run folder:" not in out and "next:" not in out, out[-3000:]


@pytest.mark.slow
def test_gpu_sweep_without_a_gpu_refuses_and_names_the_cpu_command(tmp_path):
    """A real process (the script is bash): CUDA hidden, as on a machine without a GPU; nothing may start."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    script = str(ROOT / "scripts" / "gpu_sweep.sh")
    proc = subprocess.run(
        ["bash", script, f"run.root={tmp_path}"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode == 2, lines
    assert len(lines) == 1 and lines[0].startswith("error: trainer.accelerator: no CUDA GPU"), lines
    assert "python train.py -m experiment=compare_cifar_full" in lines[0] and "trainer.accelerator=cpu" in lines[0]
    assert list(tmp_path.iterdir()) == []  # no run, no multirun/ folder, no report


@pytest.mark.slow
def test_data_on_device_moves_every_split(tmp_path):
    """data.on_device: setup() keeps train, val and test on the trainer's root device (here the CPU,
    the only device a test can count on), and a batch comes out of the loader there."""
    from test_data import _write_folder

    _write_folder(tmp_path, per_class=4)
    dm = ImageDataModule(format="imagefolder", root=str(tmp_path), val_size=8, batch_size=4, on_device=True)

    class Strategy:
        root_device = __import__("torch").device("cpu")

    dm.trainer = type("T", (), {"strategy": Strategy(), "global_rank": 0, "world_size": 1, "max_epochs": 1})()
    moved = []
    dm._move_to = lambda device: moved.append(device)  # noqa: E731 - record the call, keep the CPU tensors
    dm.setup()
    assert moved == [Strategy.root_device]
    del dm._move_to
    dm._move_to(Strategy.root_device)
    images, labels = next(iter(dm.train_dataloader()))
    assert images.device == labels.device == Strategy.root_device and images.shape[0] == 4
