"""The aspect-ratio protocol, ``experiment=extrapolation_aspect``: train at 16x16 px, test at 16x32 and
32x16 (native pixels along one axis), every image encoding with two seeds.

One job of the sweep runs here at a tiny size (a narrow model, a few batches; the experiment's data,
sizes and evaluation otherwise), through ``train.py`` in process, and its run goes through the
committed-report path (``scripts/snapshot_runs.py``, then ``vitpos.compare``): the non-square sizes
reach metrics.json and get columns of their own in the report.
"""

import json

import pytest
from conftest import CONFIGS, require_cifar, run_command
from omegaconf import OmegaConf
from test_experiment_configs import expand, sweep_params

from scripts import snapshot_runs
from vitpos.compare import compare
from vitpos.encodings import list_encodings

EXPERIMENT = "experiment=extrapolation_aspect"
SIZES = ("test/acc@res16", "test/acc@res16x32", "test/acc@res32x16", "test/acc@res32")
# what a CPU test shrinks: the model, the batches and the test images; the sizes stay the experiment's
TINY = [
    "trainer.precision=32-true", "model.compile=false", "model.dim=32", "model.depth=1", "model.num_heads=2",
    "trainer.max_epochs=1", "+trainer.limit_train_batches=2", "+trainer.limit_val_batches=1",
    "data.train_subset=256", "data.test_subset=128", "eval.test_subset=64", "task.pictures=false",
]  # fmt: skip


def test_the_sweep_is_every_image_encoding_with_two_seeds():
    """The runs the experiment's header budgets for (every image encoding of the sweep list x seeds 0
    and 1), seed the outer loop."""
    shared = str(OmegaConf.load(CONFIGS / "sweep" / "image_encodings.yaml").encoding).split(",")
    jobs = expand(sweep_params("extrapolation_aspect"))
    assert jobs == [[f"seed={seed}", f"encoding={name}"] for seed in (0, 1) for name in shared]
    assert set(shared) <= set(list_encodings(2))


@pytest.mark.slow
def test_a_tiny_job_evaluates_one_long_axis_and_the_report_shows_it(tmp_path):
    cifar = require_cifar()  # the experiment's data is CIFAR-10 (imagefolder)
    runs = tmp_path / "runs"
    args = [EXPERIMENT, "encoding=rope_2d", "seed=0", *TINY, f"data.root={cifar}", f"run.root={runs}"]
    ran = run_command("train.py", *args, cwd=tmp_path)
    assert ran.code == 0, ran.out + ran.err
    (metrics,) = (runs / "extrapolation_aspect").glob("vit_cpu_p2/rope_2d-*/seed0/metrics.json")
    status = json.loads(metrics.read_text())
    assert status["status"] == "complete" and set(SIZES) <= set(status["metrics"]), sorted(status["metrics"])
    assert not any(tag.endswith("up") for tag in status["metrics"]), "every size is at or below the native 32 px"

    snapshot = tmp_path / "docs" / "runs"
    assert snapshot_runs.snapshot(runs / "extrapolation_aspect", snapshot) == 1
    report = compare(snapshot, tmp_path / "docs" / "report").report
    assert "trained at 16 px (native 32)" in report, report
    assert "| label | 16 | 32 | 16x32 | 32x16 |" in report, report  # the squares, then wide before tall
