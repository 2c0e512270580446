"""Image classification data (CIFAR-10 or generated shapes) as a LightningDataModule.

The whole set lives in memory as uint8 tensors; augmentation (random crop with
padding, horizontal flip, then optionally a per-image TrivialAugment or
RandAugment on the uint8 tensors) and normalization run on batches after they
reach the device (``on_after_batch_transfer``).

Resolutions. CIFAR-10 is kept at its native resolution
(``data.native_size``, 32 px). The model trains at ``data.img_size`` (R):
below native, the training, validation and test images are downsampled once
(bicubic, antialiased) in ``setup``. ``test_dataloader_at(S)`` hands out the
original test pixels at S = native (no resize at all), downsamples below it and
upsamples above it; ``resampling(S)`` says which, so reports can mark the
upsampled sizes (blurred copies, no new detail). ``data=shapes`` renders
every size natively from its generator (``resampling`` is always ``native``).
Every size (``data.img_size``, ``data.train_sizes``, ``data.native_size``, a test size) is a
side or an ``[h, w]`` pair (:func:`vitpos.sizes.as_hw`); each axis is resized on its own, and a
size is upsampled when either axis is above native.

Multi-resolution training (``data.train_sizes``): the training images stay at
native resolution, each batch is cropped and flipped there, then resized to the
size drawn for it from ``(seed, epoch, batch index)`` (vitpos.data.memory).
Validation and test stay at ``data.img_size``.
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
import torch

from vitpos.sizes import HW, as_hw, plain_size

from . import augment
from .augment import policy_transform, resize_images
from .cifar10 import CLASSES as CIFAR_CLASSES
from .cifar10 import IMG_SIZE as CIFAR_SIZE
from .cifar10 import MEAN, STD, load_imagefolder, load_official
from .memory import batch_loader, process_share
from .options import check_image_data, check_split, counts_of, image_data_options
from .shapes import CLASSES as SHAPES_CLASSES
from .shapes import make_shapes


class ImageDataModule(L.LightningDataModule):
    """The options are ``data.*``'s: the keys of :class:`vitpos.config.data.Cifar10Data` or ``ShapesData``,
    where each default is written with a line on what it does (:func:`vitpos.data.options.image_data_options`
    fills in the ones not given), plus ``cache_dir`` (imagefolder's decoded tensors) and
    ``shuffle_seed`` (the run's seed: the batch order of epoch e is fixed by (seed, e)).

    A fixed, seeded split carves ``val_size`` validation images out of the training set;
    ``train_subset`` keeps a seeded subset of the rest; ``test`` is the official test set at
    ``img_size`` (``test_native``: at native resolution). ``native_size``: the resolution the data
    set is stored at (None: the data set's own; shapes: every size is drawn natively).
    ``train_sizes`` and ``size_schedule``: one size per training batch, drawn or progressive
    (:func:`vitpos.data.schedule.progressive_size`). ``crop_padding`` is in native pixels, scaled
    by ``img_size / native_size`` when the training images are downsampled once.
    """

    def __init__(self, shuffle_seed: int = 0, **options):
        super().__init__()
        options = image_data_options(options)
        check_image_data(options)  # its own rule; the config check builds this module to run it (UserError)
        self.save_hyperparameters({**options, "shuffle_seed": shuffle_seed})
        self.cfg = self.hparams
        self.shuffle_seed = shuffle_seed
        cifar = options["name"] == "cifar10"
        self.mean, self.std = (MEAN, STD) if cifar else ((0.5,) * 3, (0.25,) * 3)
        self.classes = CIFAR_CLASSES if cifar else SHAPES_CLASSES
        self._test_at: dict[HW, torch.Tensor] = {}
        self._test_keep: torch.Tensor | None = None  # data.test_subset: which of the generated test images
        self._extrapolation_keep: torch.Tensor | None = None  # eval.test_subset: which of self.test
        self.policy = policy_transform(options["augment"], options["augment_magnitude"], options["augment_ops"])
        self.train = self.val = self.test = self.test_native = None

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def native_size(self) -> int | HW | None:
        """The resolution the images are stored at (CIFAR-10: 32; ``(h, w)`` when not square); None
        for shapes (drawn at every size)."""
        if self.cfg.name == "shapes":
            return None
        return plain_size(self.cfg.native_size or CIFAR_SIZE)

    @property
    def train_sizes(self) -> tuple:
        """Every size a training batch takes (``data.train_sizes``, or ``(data.img_size,)``), each a
        side or ``(h, w)``: the shapes to compile or warm up."""
        return tuple(plain_size(s) for s in (self.cfg.train_sizes or [self.cfg.img_size]))

    def resampling(self, size) -> str:
        """How the test images at ``size`` (a side or ``[h, w]``) are made: ``native`` (the data set's
        own pixels, or shapes drawn at that size), ``downsampled`` (antialiased) or ``upsampled``
        (from native: a larger grid, but no new detail; so is a size with either axis above native)."""
        if self.native_size is None:
            return "native"
        (h, w), (nh, nw) = as_hw(size), as_hw(self.native_size)
        if (h, w) == (nh, nw):
            return "native"
        return "upsampled" if h > nh or w > nw else "downsampled"

    @property
    def _stored_size(self) -> int | HW:
        """The size the training images are kept at: native when batches are resized per step
        (``data.train_sizes``), else ``data.img_size`` (shapes: always ``data.img_size``)."""
        if self.cfg.train_sizes and self.native_size is not None:
            return self.native_size
        return plain_size(self.cfg.img_size)

    @property
    def crop_padding(self) -> int | HW:
        """``data.crop_padding`` (native pixels) at the size training batches are cropped at, scaled
        on each axis: ``(rows, columns)`` when the two differ (a non-square size)."""
        (h, w), (nh, nw) = as_hw(self._stored_size), as_hw(self.native_size or self._stored_size)
        pad_h, pad_w = round(self.cfg.crop_padding * h / nh), round(self.cfg.crop_padding * w / nw)
        return pad_h if pad_h == pad_w else (pad_h, pad_w)

    # ------------------------------------------------------------ loading
    def _load(self, train: bool) -> tuple[torch.Tensor, torch.Tensor]:
        c = self.cfg
        if c.name == "shapes":
            n = c.num_train if train else c.num_test
            return make_shapes(n, c.img_size, c.cell, seed=c.split_seed + (0 if train else 1))
        if c.format == "imagefolder":
            images, labels = load_imagefolder(c.root, "train" if train else "test", c.get("cache_dir"))
        else:
            images, labels = load_official(Path(c.root), train, c.download)
        h, w = images.shape[-2:]
        if (h, w) != as_hw(self.native_size):
            raise ValueError(
                f"data.native_size={self.native_size}, but the images of {c.root} are {h}x{w} (height x width): "
                f"set data.native_size={h if h == w else f'[{h},{w}]'}"
            )
        return images, labels

    def setup(self, stage: str | None = None) -> None:
        if self.train is not None:
            return
        c = self.cfg
        images, labels = self._load(train=True)
        test_images, test_labels = self._load(train=False)
        check_split(c, counts_of(c, len(images), len(test_images)))  # the config check's rule, on the loaded images
        perm = torch.randperm(len(images), generator=torch.Generator().manual_seed(c.split_seed))
        val_idx, train_idx = perm[: c.val_size], perm[c.val_size :]
        if c.get("train_subset"):  # not in shapes.yaml: all of data.num_train
            train_idx = train_idx[: c.train_subset]
        # resize once here (never per batch): training at its stored size, the rest at data.img_size
        self.train = (resize_images(images[train_idx], self._stored_size), labels[train_idx])
        self.val = (resize_images(images[val_idx], c.img_size), labels[val_idx])
        if c.get("test_subset"):
            keep = torch.randperm(len(test_images), generator=torch.Generator().manual_seed(c.split_seed + 1))
            self._test_keep = keep[: c.test_subset]
            test_images, test_labels = test_images[self._test_keep], test_labels[self._test_keep]
        self.test_native = (test_images, test_labels)  # shapes: at data.img_size
        self.test = (resize_images(test_images, c.img_size), test_labels)
        if c.on_device and self.trainer is not None:
            self._move_to(self.trainer.strategy.root_device)

    def _move_to(self, device: torch.device) -> None:
        """``data.on_device``: keep the uint8 data sets on the training device (a GPU), so a batch
        is one index op there and nothing crosses the bus per step (CIFAR-10: 184 MB in all)."""
        self.train, self.val, self.test, self.test_native = (
            tuple(t.to(device) for t in pair) for pair in (self.train, self.val, self.test, self.test_native)
        )

    # --------------------------------------------------------- dataloaders
    # Training order comes from (run seed, epoch) and evaluation is sharded over
    # DDP ranks without padding (see vitpos.data.memory).
    def train_dataloader(self):
        """Batches of (images, labels), or (images, labels, size) with ``data.train_sizes``."""
        rank, world = process_share(self)
        n, bs = len(self.train[0]), self.cfg.batch_size
        return batch_loader(
            self.train,
            bs,
            shuffle=True,
            drop_last=n // world > bs,
            seed=self.shuffle_seed,
            rank=rank,
            world=world,
            sizes=self.train_sizes if self.cfg.train_sizes else None,
            progressive_epochs=self._progressive_epochs(),
            size_epochs=tuple(self.cfg.size_epochs) if self.cfg.get("size_epochs") else None,
        )

    def _progressive_epochs(self) -> int | None:
        """The epochs a progressive size schedule spreads over (the trainer's ``max_epochs``);
        None for the random per-batch draw."""
        if not self.cfg.train_sizes or self.cfg.size_schedule != "progressive":
            return None
        epochs = getattr(self.trainer, "max_epochs", None) if self.trainer is not None else None
        if not epochs or epochs < 1:
            raise ValueError("data.size_schedule=progressive needs trainer.max_epochs (the epochs it splits)")
        return int(epochs)

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
            self._extrapolation_keep = None
        else:
            gen = torch.Generator().manual_seed(self.cfg.split_seed + 2)
            self._extrapolation_keep = torch.randperm(len(self.test[0]), generator=gen)[:n].sort().values
        self._test_at.clear()

    def test_dataloader_at(self, resolution):
        """The test set (or its ``limit_extrapolation`` subset) at ``resolution`` px, a side or
        ``[h, w]`` (see ``resampling``): CIFAR-10 from its native pixels (bicubic, each axis on its
        own, antialiased when shrinking; the pixels themselves at native resolution); shapes drawn at
        that size."""
        keep, size = self._extrapolation_keep, as_hw(resolution, "eval.resolutions")
        labels = self.test[1] if keep is None else self.test[1][keep]
        if size not in self._test_at:
            self._test_at[size] = self._test_images_at(size)
        return batch_loader((self._test_at[size], labels), self.cfg.eval_batch_size, shuffle=False)

    def _test_images_at(self, size: HW) -> torch.Tensor:
        c, keep = self.cfg, self._extrapolation_keep
        if c.name == "shapes" and size != as_hw(c.img_size):
            images = make_shapes(c.num_test, c.img_size, c.cell, seed=c.split_seed + 1, size=size)[0]
            images = images if self._test_keep is None else images[self._test_keep]
        else:  # CIFAR-10 at every size (shapes at its training size): from the stored native images
            images = self.test_native[0]
        images = images if keep is None else images[keep]
        return resize_images(images, size)  # a no-op at the stored size: native, the pixels as stored

    # -------------------------------------------------------- batch transforms
    def prepare_batch(self, batch, train: bool):
        """uint8 (images, labels[, size]) -> (normalized float images, labels). Training: crop, flip
        and policy at the stored size, then (``data.train_sizes``) the resize to the batch's size."""
        images, labels, *size = batch
        if train:
            images = augment.random_crop(images, self.crop_padding)
            if self.cfg.hflip:
                images = augment.random_hflip(images)
            images = augment.per_image(images, self.policy)  # data.augment: one policy draw per image
        if size:
            images = resize_images(images, size[0])  # a side or (h, w); a no-op at the stored size
        return augment.normalize(images, self.mean, self.std), labels

    def on_after_batch_transfer(self, batch, dataloader_idx: int):
        training = self.trainer is not None and self.trainer.training
        return self.prepare_batch(batch, train=training)
