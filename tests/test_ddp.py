"""DDP on CPU (gloo), through the real command line (issue 10): two processes
train a tiny shapes run; test accuracy equals a single-process evaluation of
the same checkpoint exactly, because evaluation is sharded without the padding
``DistributedSampler`` adds (201 test images: a padded split would score 202)."""

import json
import os
import subprocess
import sys

import torch
from conftest import ROOT

from vitpos.data.images import ImageDataModule
from vitpos.tasks.classification import ImageClassifier


def single_process_accuracy(module, batches) -> float:
    correct = total = 0
    with torch.no_grad():
        for images, labels in batches:
            correct += int((module(images).argmax(-1) == labels).sum())
            total += len(labels)
    return float(torch.tensor(correct) / torch.tensor(total))  # float32, as torchmetrics computes it


def test_two_process_ddp_on_cpu_scores_the_test_set_exactly_once(tmp_path):
    cmd = [
        sys.executable,
        "train.py",
        "data=shapes",
        "model=vit_micro",
        "data.num_train=384",
        "data.val_size=64",
        "data.num_test=201",  # odd: a padded 2-way split would score one image twice
        "data.batch_size=32",
        "data.eval_batch_size=64",
        "trainer.max_epochs=1",
        "trainer=ddp",  # NCCL on GPUs; gloo here, on CPU processes
        "trainer.accelerator=cpu",
        "trainer.devices=2",
        "trainer.precision=32-true",
        "trainer.enable_progress_bar=false",
        "task.pictures=false",
        "eval.resolutions=[24]",
        f"run.root={tmp_path}",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (status_file,) = tmp_path.rglob("metrics.json")
    status = json.loads(status_file.read_text())
    metrics = status["metrics"]

    checkpoint = torch.load(status["best_checkpoint"], map_location="cpu", weights_only=True)
    module = ImageClassifier.load_from_checkpoint(status["best_checkpoint"], map_location="cpu", weights_only=True)
    module.eval()
    data = ImageDataModule(**checkpoint["datamodule_hyper_parameters"])
    data.setup()
    assert len(data.test[0]) == 201

    def prepared(loader):
        return (data.prepare_batch(batch, train=False) for batch in loader)

    assert metrics["test/acc"] == single_process_accuracy(module, prepared(data.test_dataloader()))
    # the extrapolation ran on rank 0 over the whole set, not on one shard (it divides in float64)
    at24 = single_process_accuracy(module, prepared(data.test_dataloader_at(24)))
    assert round(metrics["test/acc@res24"] * 201) == round(at24 * 201)
