"""Image classification with a ViT: the LightningModule behind ``task=classification``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from timm.data import Mixup
from timm.utils import ModelEmaV3

from vitpos.config.saved import complete
from vitpos.integrations import is_timm
from vitpos.integrations.timm import apply_encoding
from vitpos.integrations.timm_weights import create_vit, geometry, load_planned, plan_checkpoint, read_checkpoint
from vitpos.models import network

from .base import TaskModule, accuracy


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

    ``model=timm`` (a ``model.name``): timm's ``VisionTransformer`` converted by
    :func:`vitpos.integrations.timm.apply_encoding`; with ``pretrained`` (training, from
    :func:`vitpos.tasks.build.build`), the weights of ``model.checkpoint`` are loaded first.

    ``task.flip_tta`` (with ``data.hflip``, mirrored images being valid ones):
    the test set is also scored with horizontal-flip test-time augmentation,
    logged as ``test/acc_flip`` beside ``test/acc`` (never instead of it).
    """

    def __init__(self, cfg: dict, pretrained: bool = False):
        cfg = complete(cfg, image=True)  # a key an older or hand-written config lacks: vitpos/config/saved.py
        data, task = cfg["data"], cfg["task"]
        super().__init__(cfg, image_network(cfg, pretrained), num_classes=data["num_classes"])
        self.save_hyperparameters(ignore=["pretrained"])  # rebuilt from a checkpoint, its weights are the checkpoint's
        self.ema = None
        if task["ema_decay"] > 0:
            self.ema = ModelEmaV3(self.model, decay=task["ema_decay"], use_warmup=task["ema_warmup"])
            self.ema.requires_grad_(False)  # never trained (DDP would wait for its gradients otherwise)
            self.val_acc_raw, self.test_acc_raw = (accuracy(data["num_classes"], None) for _ in range(2))
        # task.flip_tta: the test set scored again with horizontal-flip test-time augmentation (the
        # softmax of each image and its mirror averaged), as test/acc_flip; test/acc stays the plain score.
        # Only where training flips (data.hflip): labels that change under mirroring (shapes) are not.
        flip_tta = task["flip_tta"] and data["hflip"]
        self.test_acc_flip = accuracy(data["num_classes"], None) if flip_tta else None
        self.test_predictions: list[tuple[torch.Tensor, torch.Tensor]] = []  # (predicted, true) per test batch
        self.label_smoothing = task["label_smoothing"]
        self.mixup = None
        if task["mixup"] > 0 or task["cutmix"] > 0:
            self.mixup = Mixup(
                mixup_alpha=task["mixup"],
                cutmix_alpha=task["cutmix"],
                label_smoothing=self.label_smoothing,
                num_classes=data["num_classes"],
            )

    @property
    def eval_model(self) -> torch.nn.Module:
        """The weights evaluation scores: the EMA when ``task.ema_decay`` > 0, else the model."""
        return self.model if self.ema is None else self.ema.module

    def logits_targets(self, batch, forward):
        images, labels = batch
        return forward(images), labels  # (B, classes), (B,)

    def training_loss(self, batch):
        """Cross-entropy with label smoothing, or on mixup/cutmix's soft targets
        (then ``train/acc`` scores the mixed images against their first label)."""
        images, labels = batch
        if self.mixup is not None and len(images) % 2 == 0:
            images, soft = self.mixup(images, labels)
            logits = self.train_forward(images)
            return logits, labels, torch.sum(-soft * F.log_softmax(logits, -1), -1).mean()
        logits = self.train_forward(images)
        return logits, labels, F.cross_entropy(logits, labels, label_smoothing=self.label_smoothing)

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        if self.ema is not None:
            self.ema.update(self.model, step=self.global_step)

    def on_test_epoch_start(self) -> None:
        self.test_predictions = []

    def _eval_step(self, batch, stage: str) -> tuple[torch.Tensor, torch.Tensor]:
        logits, labels = super()._eval_step(batch, stage)
        images = batch[0]
        if self.ema is not None:  # the raw weights, scored beside the average
            raw = getattr(self, f"{stage}_acc_raw")
            raw.update(self.model(images), labels)
            self.log(f"{stage}/acc_raw", raw)
        if stage == "test":  # per image, in test-set order: later analyses can bootstrap over test images
            self.test_predictions.append((logits.argmax(-1).to(torch.uint8).cpu(), labels.to(torch.uint8).cpu()))
        if stage == "test" and self.test_acc_flip is not None:  # flip TTA, beside the plain score
            mirrored = self.eval_model(images.flip(-1))  # (B, classes) of the mirrored images
            self.test_acc_flip.update(logits.softmax(-1) + mirrored.softmax(-1), labels)
            self.log("test/acc_flip", self.test_acc_flip)
        return logits, labels


def image_network(cfg: dict, pretrained: bool = False) -> torch.nn.Module:
    """The network of an image run: vitpos's ViT, or with ``model=timm`` timm's ViT with the
    encoding in place of its positions (:func:`timm_model`)."""
    if is_timm(cfg["model"]):
        return timm_model(cfg, pretrained)
    return network(cfg, cfg["data"]["num_classes"])


def timm_model(cfg: dict, pretrained: bool) -> torch.nn.Module:
    """``model=timm``: ``timm.create_model(model.name, pretrained=False, ...)`` for the data's classes
    and size, the weights of ``model.checkpoint`` when ``pretrained`` (the keys that do not apply
    listed in one printed line), then the encoding in place of its position handling. The timm
    model's geometry is saved in ``cfg["model"]["geometry"]`` (no part of the run's identity) for
    the tools that estimate memory from a checkpoint's config."""
    m, data = cfg["model"], cfg["data"]
    enc = dict(cfg["encoding"])
    name = enc.pop("name")
    model = create_vit(m, data["num_classes"], data["img_size"])
    if pretrained and m.get("checkpoint"):
        plan = plan_checkpoint(model, read_checkpoint(m["checkpoint"]), name, m["checkpoint"])
        load_planned(model, plan)
        print(plan.line(), flush=True)
    m["geometry"] = geometry(model)
    return apply_encoding(model, name, **enc)
