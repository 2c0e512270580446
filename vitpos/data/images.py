"""Image classification data (CIFAR-10 or generated shapes) as a LightningDataModule.

The whole set lives in memory as uint8 tensors; augmentation (random crop with
padding, horizontal flip, then optionally a per-image TrivialAugment or
RandAugment on the uint8 tensors) and normalization run on batches after they
reach the device (``on_after_batch_transfer``).
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
import torch

from . import augment
from .augment import policy_transform
from .cifar10 import CLASSES as CIFAR_CLASSES
from .cifar10 import MEAN, STD, load_imagefolder, load_official
from .memory import batch_loader, process_share
from .shapes import CLASSES as SHAPES_CLASSES
from .shapes import make_shapes


class ImageDataModule(L.LightningDataModule):
    """``name``: cifar10 | shapes. ``format`` (cifar10): torchvision | imagefolder.

    A fixed, seeded split carves ``val_size`` validation images out of the
    training set; ``train_subset`` keeps only that many training images (a
    seeded subset, for short budgets). ``test`` is the official test set.
    """

    def __init__(
        self,
        name: str = "cifar10",
        format: str = "torchvision",
        root: str = "data",
        img_size: int = 32,
        batch_size: int = 128,
        eval_batch_size: int = 512,
        val_size: int = 5000,
        train_subset: int | None = None,
        test_subset: int | None = None,
        split_seed: int = 0,
        crop_padding: int = 4,
        hflip: bool = True,
        augment: str = "none",
        augment_magnitude: int = 9,
        augment_ops: int = 2,
        download: bool = True,
        num_train: int = 20000,
        num_test: int = 4000,
        cell: int = 4,
        cache_dir: str | None = None,
        shuffle_seed: int = 0,
    ):
        super().__init__()
        if name not in ("cifar10", "shapes"):
            raise ValueError(f"unknown data set '{name}'; valid: cifar10, shapes (data=...)")
        if format not in ("torchvision", "imagefolder"):
            raise ValueError(f"unknown data.format '{format}'; valid: torchvision, imagefolder")
        self.save_hyperparameters()
        self.cfg = self.hparams
        self.shuffle_seed = shuffle_seed  # the run's seed: batch order of epoch e is fixed by (seed, e)
        self.mean, self.std = (MEAN, STD) if name == "cifar10" else ((0.5,) * 3, (0.25,) * 3)
        self.classes = CIFAR_CLASSES if name == "cifar10" else SHAPES_CLASSES
        self._test_at: dict[int, torch.Tensor] = {}
        self._extrapolation_set: tuple[torch.Tensor, torch.Tensor] | None = None  # eval.test_subset of self.test
        self.policy = policy_transform(augment, augment_magnitude, augment_ops)  # data.augment
        self.train = self.val = self.test = None

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    # ------------------------------------------------------------ loading
    def _load(self, train: bool) -> tuple[torch.Tensor, torch.Tensor]:
        c = self.cfg
        if c.name == "shapes":
            n = c.num_train if train else c.num_test
            return make_shapes(n, c.img_size, c.cell, seed=c.split_seed + (0 if train else 1))
        if c.format == "imagefolder":
            return load_imagefolder(c.root, "train" if train else "test", c.cache_dir)
        return load_official(Path(c.root), train, c.download)

    def setup(self, stage: str | None = None) -> None:
        if self.train is not None:
            return
        c = self.cfg
        images, labels = self._load(train=True)
        if c.val_size >= len(images):
            raise ValueError(f"data.val_size={c.val_size} leaves no training images out of {len(images)}")
        perm = torch.randperm(len(images), generator=torch.Generator().manual_seed(c.split_seed))
        val_idx, train_idx = perm[: c.val_size], perm[c.val_size :]
        if c.train_subset:
            train_idx = train_idx[: c.train_subset]
        self.train = (images[train_idx], labels[train_idx])
        self.val = (images[val_idx], labels[val_idx])
        test_images, test_labels = self._load(train=False)
        if c.test_subset:
            keep = torch.randperm(len(test_images), generator=torch.Generator().manual_seed(c.split_seed + 1))
            keep = keep[: c.test_subset]
            test_images, test_labels = test_images[keep], test_labels[keep]
        self.test = (test_images, test_labels)

    # --------------------------------------------------------- dataloaders
    # Training order comes from (run seed, epoch) and evaluation is sharded over
    # DDP ranks without padding (see vitpos.data.memory).
    def train_dataloader(self):
        rank, world = process_share(self)
        n, bs = len(self.train[0]), self.cfg.batch_size
        return batch_loader(
            self.train, bs, shuffle=True, drop_last=n // world > bs, seed=self.shuffle_seed, rank=rank, world=world
        )

    def val_dataloader(self):
        return batch_loader(self.val, self.cfg.eval_batch_size, shuffle=False, **self._shard())

    def test_dataloader(self):
        return batch_loader(self.test, self.cfg.eval_batch_size, shuffle=False, **self._shard())

    def _shard(self) -> dict:
        rank, world = process_share(self)
        return {"rank": rank, "world": world}

    def limit_extrapolation(self, n: int | None) -> None:
        """Evaluate other resolutions on a fixed, seeded subset of ``n`` test images (``eval.test_subset``;
        None: all). The run's ``test/acc`` still scores the whole test set."""
        if n is None or n >= len(self.test[0]):
            self._extrapolation_set = None
        else:
            gen = torch.Generator().manual_seed(self.cfg.split_seed + 2)
            keep = torch.randperm(len(self.test[0]), generator=gen)[:n].sort().values
            self._extrapolation_set = (self.test[0][keep], self.test[1][keep])
        self._test_at.clear()

    def test_dataloader_at(self, resolution: int):
        """The test set (or its ``limit_extrapolation`` subset) resized to ``resolution`` (bicubic;
        antialiased when shrinking)."""
        images, labels = self._extrapolation_set or self.test
        if resolution not in self._test_at:
            self._test_at[resolution] = augment.resize_images(images, resolution)
        return batch_loader((self._test_at[resolution], labels), self.cfg.eval_batch_size, shuffle=False)

    # -------------------------------------------------------- batch transforms
    def prepare_batch(self, batch, train: bool):
        images, labels = batch
        if train:
            images = augment.random_crop(images, self.cfg.crop_padding)
            if self.cfg.hflip:
                images = augment.random_hflip(images)
            images = augment.per_image(images, self.policy)  # data.augment: one policy draw per image
        return augment.normalize(images, self.mean, self.std), labels

    def on_after_batch_transfer(self, batch, dataloader_idx: int):
        training = self.trainer is not None and self.trainer.training
        return self.prepare_batch(batch, train=training)
