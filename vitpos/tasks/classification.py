"""Image classification with a ViT: the LightningModule behind ``task=classification``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
import torchmetrics

from vitpos.models import VisionTransformer
from vitpos.models.compile import training_forward

from .base import TaskModule
from .optim import configure_optimizers


class ImageClassifier(TaskModule):
    """Takes one plain config dict (``model``, ``encoding``, ``optim``, ``task``,
    ``data``) and saves it, so ``ImageClassifier.load_from_checkpoint(path)``
    rebuilds the model without Hydra or the data.

    Loss: cross-entropy with label smoothing; with ``task.mixup`` or
    ``task.cutmix`` > 0, timm's ``Mixup`` mixes whole batches and the loss
    takes the soft targets.

    ``task.ema_decay`` > 0 keeps an exponential moving average of the weights
    (timm's ``ModelEmaV3``, with its warmup when ``task.ema_warmup``), updated
    after every optimizer step. Evaluation (validation, test, best-checkpoint
    choice, extrapolation) then uses the averaged weights, and the raw weights
    are scored alongside as ``<stage>/acc_raw``. The average is part of the
    module, so checkpoints and exact resume carry it.
    """

    def __init__(self, cfg: dict):
        super().__init__()
        self.save_hyperparameters()
        self.cfg = cfg
        data, task = cfg["data"], cfg.get("task", {})
        model_opts = {k: v for k, v in cfg["model"].items() if k != "compile"}
        self.model = VisionTransformer(
            encoding=cfg["encoding"], img_size=data["img_size"], num_classes=data["num_classes"], **model_opts
        )
        self.ema = None
        if task.get("ema_decay", 0.0) > 0:
            from timm.utils import ModelEmaV3

            self.ema = ModelEmaV3(self.model, decay=task["ema_decay"], use_warmup=task.get("ema_warmup", True))
            self.ema.requires_grad_(False)  # never trained (DDP would wait for its gradients otherwise)
        self.train_forward = training_forward(self.model, cfg["model"].get("compile", False))  # model.compile
        self.label_smoothing = task.get("label_smoothing", 0.0)
        self.mixup = None
        if task.get("mixup", 0) > 0 or task.get("cutmix", 0) > 0:
            from timm.data import Mixup

            self.mixup = Mixup(
                mixup_alpha=task.get("mixup", 0.0),
                cutmix_alpha=task.get("cutmix", 0.0),
                label_smoothing=self.label_smoothing,
                num_classes=data["num_classes"],
            )
        n = data["num_classes"]
        self.train_acc = torchmetrics.classification.MulticlassAccuracy(n, average="micro")
        self.val_acc = torchmetrics.classification.MulticlassAccuracy(n, average="micro")
        self.test_acc = torchmetrics.classification.MulticlassAccuracy(n, average="micro")
        if self.ema is not None:  # the raw weights, scored beside the average
            self.val_acc_raw = torchmetrics.classification.MulticlassAccuracy(n, average="micro")
            self.test_acc_raw = torchmetrics.classification.MulticlassAccuracy(n, average="micro")

    @property
    def eval_model(self) -> torch.nn.Module:
        """The weights evaluation scores: the EMA when ``task.ema_decay`` > 0, else the model."""
        return self.model if self.ema is None else self.ema.module

    @property
    def encoding(self):
        """The evaluated model's encoding (extrapolation switches its strategy)."""
        return self.eval_model.pos

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model(images) if self.training else self.eval_model(images)

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        if self.ema is not None:
            self.ema.update(self.model, step=self.global_step)

    def training_step(self, batch, batch_idx):
        images, labels = batch
        if self.mixup is not None and len(images) % 2 == 0:
            images, soft = self.mixup(images, labels)
            logits = self.train_forward(images)
            loss = torch.sum(-soft * F.log_softmax(logits, -1), -1).mean()
        else:
            logits = self.train_forward(images)
            loss = F.cross_entropy(logits, labels, label_smoothing=self.label_smoothing)
        self.train_acc(logits, labels)
        self.log("train/loss", loss, prog_bar=True)
        self.log("train/acc", self.train_acc, on_step=False, on_epoch=True)
        return loss

    def _eval_step(self, batch, stage: str, metric):
        images, labels = batch
        logits = self(images)
        loss = F.cross_entropy(logits, labels)
        metric(logits, labels)
        self.log(f"{stage}/loss", loss, prog_bar=stage == "val", sync_dist=True)
        self.log(f"{stage}/acc", metric, prog_bar=stage == "val")
        if self.ema is not None:
            raw = getattr(self, f"{stage}_acc_raw")
            raw(self.model(images), labels)
            self.log(f"{stage}/acc_raw", raw)

    def validation_step(self, batch, batch_idx):
        self._eval_step(batch, "val", self.val_acc)

    def test_step(self, batch, batch_idx):
        self._eval_step(batch, "test", self.test_acc)

    @torch.no_grad()
    def evaluate_batch(self, batch) -> tuple[torch.Tensor, torch.Tensor, int]:
        """(summed loss, number correct, count) on a prepared batch, for the
        extrapolation evaluator."""
        images, labels = batch
        logits = self(images)
        loss = F.cross_entropy(logits, labels, reduction="sum")
        return loss, (logits.argmax(-1) == labels).sum(), len(labels)

    def configure_optimizers(self):
        return configure_optimizers(self, self.model, self.cfg["optim"])
