"""Per-token classification on toy sequences: the LightningModule behind ``task=sequence``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
import torchmetrics

from vitpos.data.sequence import IGNORE, SequenceDataModule, task_sizes
from vitpos.models.compile import training_forward
from vitpos.models.seq_transformer import SequenceTransformer

from .base import TaskModule
from .optim import configure_optimizers


class SequenceTask(TaskModule):
    """Takes one plain config dict (``model``, ``encoding``, ``optim``, ``data``)
    and saves it, so ``SequenceTask.load_from_checkpoint(path)`` rebuilds the
    model without Hydra or the data. ``data`` needs ``task`` and ``train_len``
    (and ``vocab_size``, ``probe_classes`` if not the defaults).

    Loss and accuracy are per token over the targets that are not -100
    (padding, and positions with nothing to predict).
    """

    def __init__(self, cfg: dict):
        super().__init__()
        self.save_hyperparameters()
        self.cfg = cfg
        data = cfg["data"]
        vocab, classes = task_sizes(data["task"], data.get("vocab_size", 16), data.get("probe_classes", 512))
        model_opts = {k: v for k, v in cfg["model"].items() if k != "compile"}
        self.model = SequenceTransformer(
            encoding=cfg["encoding"], vocab_size=vocab, num_classes=classes, max_len=data["train_len"], **model_opts
        )
        self.train_forward = training_forward(self.model, cfg["model"].get("compile", False))  # model.compile
        self.train_acc, self.val_acc, self.test_acc = (
            torchmetrics.classification.MulticlassAccuracy(classes, average="micro", ignore_index=IGNORE)
            for _ in range(3)
        )

    @property
    def encoding(self):
        return self.model.pos

    def forward(self, tokens: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.model(tokens, padding_mask)  # (B, N, classes)

    def _logits_loss(self, batch, reduction: str = "mean"):
        forward = self.train_forward if self.training else self
        logits = forward(batch["tokens"], batch["padding_mask"])
        loss = F.cross_entropy(
            logits.flatten(0, 1), batch["targets"].flatten(), ignore_index=IGNORE, reduction=reduction
        )
        return logits, loss

    def training_step(self, batch, batch_idx):
        logits, loss = self._logits_loss(batch)
        self.train_acc(logits.flatten(0, 1), batch["targets"].flatten())
        b = len(batch["tokens"])
        self.log("train/loss", loss, prog_bar=True, batch_size=b)
        self.log("train/acc", self.train_acc, on_step=False, on_epoch=True, batch_size=b)
        return loss

    def _eval_step(self, batch, stage: str, metric):
        logits, loss = self._logits_loss(batch)
        metric(logits.flatten(0, 1), batch["targets"].flatten())
        weight = (batch["targets"] != IGNORE).sum()  # per-token mean over the epoch, not per batch
        # sync_dist: the weighted mean over every DDP rank's tokens, once at epoch end
        self.log(f"{stage}/loss", loss, prog_bar=stage == "val", batch_size=int(weight), sync_dist=True)
        self.log(f"{stage}/acc", metric, prog_bar=stage == "val", batch_size=int(weight))

    def validation_step(self, batch, batch_idx):
        self._eval_step(batch, "val", self.val_acc)

    def test_step(self, batch, batch_idx):
        self._eval_step(batch, "test", self.test_acc)

    @torch.no_grad()
    def evaluate_batch(self, batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(summed loss, number correct, number of scored tokens) on one batch,
        for the extrapolation evaluator."""
        logits, loss = self._logits_loss(batch, reduction="sum")
        keep = batch["targets"] != IGNORE
        correct = ((logits.argmax(-1) == batch["targets"]) & keep).sum()
        return loss, correct, keep.sum()

    def configure_optimizers(self):
        return configure_optimizers(self, self.model, self.cfg["optim"])


def build(cfg) -> tuple[SequenceTask, SequenceDataModule]:
    """(module, datamodule) from the composed Hydra config (an OmegaConf
    DictConfig or a plain dict with ``model``, ``encoding``, ``optim``,
    ``data``). The data are fixed by ``data.seed``, not by the run's ``seed``."""
    from omegaconf import DictConfig, OmegaConf

    if isinstance(cfg, DictConfig):
        cfg = OmegaConf.to_container(cfg, resolve=True)
    module = SequenceTask(cfg)  # the whole plain config is saved, so tools can rebuild the run
    datamodule = SequenceDataModule(**cfg["data"])
    return module, datamodule
