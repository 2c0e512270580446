"""DDP started from outside, as on a cluster: ``torchrun --nproc-per-node=2 train.py trainer=ddp ...``
(gloo on CPU; a real process launcher is the point). Lightning reads the ranks torchrun sets
(RANK, LOCAL_RANK, WORLD_SIZE) and starts no processes of its own; under SLURM it reads srun's
(SLURM_PROCID, ...) the same way (docs/cluster.md).

What "equal to one process" means here: ``data.batch_size`` is per process, so two processes of
batch 16 take the same optimizer steps as one process of batch 32. Each epoch's permutation
comes from (seed, epoch) and rank r keeps ``perm[r::2]`` (vitpos.data.memory.EpochSampler), so
the union of the two ranks' batch k is exactly the single process's batch k; DDP averages the
two half-batch gradients, which is the gradient of the mean loss over the whole batch. The two
runs therefore compute the same steps, up to float32 summation order. Left out on purpose: the
random crop (its offsets are drawn per batch from each rank's own generator, so the two
processes crop other pixels than one process would: ``data.crop_padding=0``) and dropout (none
in vit_micro); ``train/loss`` curves are rank 0's half batch, not compared. Evaluation is
sharded without padding (tests/test_ddp.py), so accuracies are equal exactly and losses to
float32 rounding; the weights agree to 1e-5.
"""

import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import ROOT

pytestmark = pytest.mark.slow

COMMON = [
    "data=shapes", "model=vit_micro", "data.num_train=256", "data.val_size=64", "data.num_test=96",
    "data.crop_padding=0", "trainer.max_epochs=2", "trainer.precision=32-true", "trainer.accelerator=cpu",
    "trainer.enable_progress_bar=false", "task.pictures=false", "eval.resolutions=[]",
]  # fmt: skip
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}  # one thread per process


def finished(root):
    (metrics,) = root.rglob("metrics.json")
    status = json.loads(metrics.read_text())
    state = torch.load(metrics.parent / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    return status["metrics"], state


def test_torchrun_two_processes_equal_one_process_with_the_same_global_batch(tmp_path):
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]  # = torchrun
    two = [*torchrun, "train.py", *COMMON, "trainer=ddp", "trainer.devices=2", "trainer.num_nodes=1",
           "data.batch_size=16", f"run.root={tmp_path / 'ddp'}"]  # fmt: skip
    one = [sys.executable, "train.py", *COMMON, "data.batch_size=32", f"run.root={tmp_path / 'one'}"]
    for cmd in (two, one):
        proc = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (ddp, ddp_state), (single, single_state) = finished(tmp_path / "ddp"), finished(tmp_path / "one")

    assert ddp_state["global_step"] == single_state["global_step"] == 2 * (256 - 64) // 32
    for name, value in single_state["state_dict"].items():
        torch.testing.assert_close(ddp_state["state_dict"][name], value, rtol=1e-5, atol=1e-5, msg=name)
    for key in ("test/acc", "test/acc_raw", "val/acc_best"):
        assert ddp[key] == single[key], key
    assert ddp["test/loss"] == pytest.approx(single["test/loss"], rel=1e-5, abs=0)


RANK_VARIABLES = ("RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID")


@pytest.mark.parametrize(
    "env, main",
    [
        ({}, True),  # one process
        ({"LOCAL_RANK": "1"}, False),  # Lightning's own launcher, second process
        pytest.param({"RANK": "2", "LOCAL_RANK": "0", "GROUP_RANK": "1"}, False, id="torchrun-node1"),
        pytest.param({"SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURM_NODEID": "1"}, False, id="srun-task5"),
    ],
)  # fmt: skip
def test_only_global_rank_zero_claims_the_run_folder(monkeypatch, env, main):
    """Every process of a DDP run runs train() before Lightning sets its ranks up, and only rank 0
    may take the run folder's lock (vitpos/run/folder.py): the others would find it held and stop
    ("run folder ... is in use"). torchrun on a second node sets LOCAL_RANK=0 and srun sets no
    LOCAL_RANK at all: rank 0 is what RANK or SLURM_PROCID say (docs/cluster.md, multi-node DDP;
    before is_main_process read them, a two-node torchrun on one host stopped this way)."""
    from vitpos.run.folder import is_main_process

    for name in RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert is_main_process() is main
