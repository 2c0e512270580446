"""What both tasks share: the training, validation and test steps, their metrics,
the extrapolation evaluator's batch score, the optimizer, and safe checkpoint loading.

A task is a model plus one hook, :meth:`TaskModule.logits_targets`, that turns a
batch into one row of logits per scored item (an image; a sequence's tokens)
and its class index. Everything else is computed here, once, for both tasks:

- loss: cross-entropy, ignoring targets equal to ``IGNORE`` (padding, tokens
  with nothing to predict); accuracy: torchmetrics' micro accuracy;
- metrics: ``train/loss`` (per step), ``train/acc``, ``val/loss``,
  ``val/acc``, ``test/loss``, ``test/acc`` (per epoch). Epoch values are exact
  under DDP with uneven shards: each rank adds up sums and counts, and the sums
  are added over ranks before the one division (:class:`MeanLoss`).
"""

from __future__ import annotations

import lightning as L
import torch
import torch.nn.functional as F
import torchmetrics
from torch import nn

from vitpos.data.sequence import IGNORE
from vitpos.models.compile import training_forward

from .optim import configure_optimizers


class MeanLoss(torchmetrics.Metric):
    """Mean loss over every scored item an epoch saw, on every DDP rank.

    ``update(loss, count)`` takes a batch's mean loss and its number of scored
    items. The metric keeps the summed loss and the count, torchmetrics adds
    both over ranks (``dist_reduce_fx="sum"``), and ``compute`` divides once:
    the single-process value, whatever the shard sizes. (A per-rank mean
    averaged over ranks weights a 100-image shard like a 101-image one.)

    The sum accumulates ``loss * count`` in float32 in batch order, exactly as
    Lightning's own epoch mean of a logged tensor did, so one-process runs keep
    their numbers. A non-finite loss stays in the sum (``DivergenceGuard``
    reads ``val/loss``); torchmetrics' ``MeanMetric`` drops NaNs (``"warn"``)
    or, with ``nan_strategy="disable"``, its weights (torchmetrics 1.9).
    """

    full_state_update = False

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.add_state("loss_sum", torch.tensor(0.0), dist_reduce_fx="sum")
        self.add_state("count", torch.tensor(0), dist_reduce_fx="sum")

    def update(self, loss: torch.Tensor, count: torch.Tensor | int) -> None:
        self.loss_sum = self.loss_sum + loss.detach().to(self.loss_sum.dtype) * count
        self.count = self.count + count

    def compute(self) -> torch.Tensor:
        return self.loss_sum / self.count


def accuracy(num_classes: int, ignore_index: int | None) -> torchmetrics.Metric:
    return torchmetrics.classification.MulticlassAccuracy(num_classes, average="micro", ignore_index=ignore_index)


class TaskModule(L.LightningModule):
    """A LightningModule around ``model`` (an encoder whose ``pos`` is its
    positional encoding) that scores ``num_classes`` classes.

    Subclasses build the model, call ``super().__init__`` and then
    ``self.save_hyperparameters()`` (so the checkpoint stores the plain config
    and ``load_from_checkpoint(path)`` rebuilds the module), and implement
    :meth:`logits_targets`. ``ignore_index``: targets the accuracy skips (the
    loss always skips ``IGNORE``). Override :meth:`training_loss` for a
    training loss other than plain cross-entropy, ``eval_model`` to evaluate
    other weights than the trained ones (an EMA).
    """

    def __init__(self, cfg: dict, model: nn.Module, num_classes: int, ignore_index: int | None = None):
        super().__init__()
        self.cfg = cfg
        self.model = model
        self.train_forward = training_forward(model, cfg["model"]["compile"])  # model.compile
        self.train_acc, self.val_acc, self.test_acc = (accuracy(num_classes, ignore_index) for _ in range(3))
        self.val_loss, self.test_loss = MeanLoss(), MeanLoss()

    # --------------------------------------------------------------- the hook
    def logits_targets(self, batch, forward) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits (M, classes), targets (M,)) for the M scored rows of ``batch``,
        running the model through ``forward`` (``self.train_forward`` in
        training, ``self`` in evaluation). Targets equal to ``IGNORE`` are not
        scored."""
        raise NotImplementedError

    # ------------------------------------------------------------- the model
    @property
    def eval_model(self) -> nn.Module:
        """The weights evaluation scores (validation, test, extrapolation)."""
        return self.model

    @property
    def encoding(self):
        """The evaluated model's encoding (extrapolation switches its strategy)."""
        return self.eval_model.pos

    def forward(self, *inputs) -> torch.Tensor:
        return self.model(*inputs) if self.training else self.eval_model(*inputs)

    # ----------------------------------------------------------------- steps
    def training_loss(self, batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(logits, targets, loss to minimise) for one training batch."""
        logits, targets = self.logits_targets(batch, self.train_forward)
        return logits, targets, F.cross_entropy(logits, targets, ignore_index=IGNORE)

    def training_step(self, batch, batch_idx):
        logits, targets, loss = self.training_loss(batch)
        self.train_acc.update(logits, targets)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(targets))  # per step: the size only labels it
        self.log("train/acc", self.train_acc, on_step=False, on_epoch=True)
        return loss

    def _eval_step(self, batch, stage: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Adds one batch to ``<stage>/loss`` and ``<stage>/acc``; Lightning logs
        each metric's ``compute()`` (summed over DDP ranks) at the epoch's end.
        Returns the batch's (logits, targets) for subclasses that score more."""
        logits, targets = self.logits_targets(batch, self)
        loss = F.cross_entropy(logits, targets, ignore_index=IGNORE)
        mean_loss, acc = getattr(self, f"{stage}_loss"), getattr(self, f"{stage}_acc")
        mean_loss.update(loss, (targets != IGNORE).sum())
        acc.update(logits, targets)
        self.log(f"{stage}/loss", mean_loss, prog_bar=stage == "val")
        self.log(f"{stage}/acc", acc, prog_bar=stage == "val")
        return logits, targets

    def validation_step(self, batch, batch_idx):
        self._eval_step(batch, "val")

    def test_step(self, batch, batch_idx):
        self._eval_step(batch, "test")

    @torch.no_grad()
    def evaluate_batch(self, batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(summed loss, number correct, number scored) on one prepared batch, for
        the extrapolation evaluator, which adds them up over the test set."""
        logits, targets = self.logits_targets(batch, self)
        scored = targets != IGNORE
        loss = F.cross_entropy(logits, targets, ignore_index=IGNORE, reduction="sum")
        return loss, ((logits.argmax(-1) == targets) & scored).sum(), scored.sum()

    def configure_optimizers(self):
        return configure_optimizers(self, self.model, self.cfg["optim"])

    @classmethod
    def load_from_checkpoint(cls, checkpoint_path, *args, weights_only: bool = True, **kwargs):
        """``weights_only=True`` by default: the checkpoint's config is stored as
        plain containers, so nothing in it needs unpickling, and a crafted file is
        refused instead of executed (``torch.load`` docs, "weights_only")."""
        return super().load_from_checkpoint(checkpoint_path, *args, weights_only=weights_only, **kwargs)
