"""The data sets' options and defaults (``data=cifar10``, ``shapes``, ``seq_copy``, ...): one dataclass per data set.

``num_classes`` is what the data set has, not an option. The data module (:class:`vitpos.data.images.ImageDataModule`)
fills in the defaults of the data set named by ``name`` from here (:func:`vitpos.data.options.image_data_options`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Cifar10Data:
    """CIFAR-10. ``format=torchvision`` downloads the official release into ``root`` on first use;
    ``format=imagefolder`` reads ``root/train/<class>/*`` and ``root/test/<class>/*`` (a JPEG copy)."""

    name: Any = "cifar10"
    format: Any = "torchvision"
    root: Any = "data"
    img_size: Any = 32  # the training resolution R, or [h,w]; below native the images are downsampled once
    native_size: Any = 32  # the resolution the data set is stored at: eval at this size sees the original pixels
    train_sizes: Any = None  # multi-resolution training: e.g. [16,24,32] or [16,[16,32],32], one size per batch
    size_schedule: Any = "random"  # with train_sizes: random (a size per batch) | progressive (equal epoch runs,
    #   low resolution first, FixRes-style)
    size_epochs: Any = None  # progressive: the epochs of each size, e.g. [7,3,2] (scaled to trainer.max_epochs)
    on_device: Any = False  # keep the uint8 data sets on the training device (GPU sweeps: no copy per step)
    num_classes: Any = 10
    batch_size: Any = 128
    eval_batch_size: Any = 512
    val_size: Any = 5000  # seeded split carved from the 50,000 training images
    train_subset: Any = None  # keep only this many training images (short budgets)
    test_subset: Any = None
    split_seed: Any = 0
    crop_padding: Any = 4  # native pixels (scaled to img_size when training below native: 2 at 16 px)
    hflip: Any = True
    download: Any = True
    augment: Any = "none"  # per-image policy on the uint8 tensors after crop/flip: none | trivial | randaugment
    augment_magnitude: Any = 9  # randaugment: strength (of 31 bins)
    augment_ops: Any = 2  # randaugment: ops per image


@dataclass
class ShapesData:
    """Generated offline: the red square's quadrant relative to a blue square (4 classes, chance 25%)."""

    name: Any = "shapes"
    img_size: Any = 32  # or [h,w]: a grid of h/cell x w/cell cells
    native_size: Any = None  # none: every size is drawn from the generator (same layouts and labels, sharp squares)
    train_sizes: Any = None  # multi-resolution training: e.g. [16,24,32], one size per batch (resized from img_size)
    size_schedule: Any = "random"  # with train_sizes: random (per batch) | progressive (equal runs of epochs)
    size_epochs: Any = None  # progressive: the epochs of each size, e.g. [2,1,1] (scaled to trainer.max_epochs)
    on_device: Any = False  # keep the data sets on the training device (GPU runs)
    num_classes: Any = 4
    num_train: Any = 20000
    num_test: Any = 4000
    val_size: Any = 2000
    train_subset: Any = None  # keep only this many training images (configs/debug/subset.yaml)
    test_subset: Any = None
    cell: Any = 4  # square size; keep equal to model.patch_size so patches align
    batch_size: Any = 128
    eval_batch_size: Any = 512
    split_seed: Any = 0
    crop_padding: Any = 4
    hflip: Any = False  # a flip swaps left and right: it would change the label
    augment: Any = "none"  # a geometric policy would move the squares (and so the label): keep none
    augment_magnitude: Any = 9
    augment_ops: Any = 2


@dataclass
class SequenceData:
    """A toy sequence task (:class:`vitpos.data.sequence.SequenceDataModule`, whose arguments these are)."""

    name: Any = "seq_copy"
    task: Any = "copy_offset"  # copy_offset | reverse | sort | position_probe
    vocab_size: Any = 16
    train_len: Any = 64  # longest training sequence = the model's training length
    min_len: Any = 8  # lengths are uniform in [min_len, train_len]
    offset: Any = 3
    probe_classes: Any = 512  # position_probe only
    anchor: Any = False  # position_probe only: a distinct first token
    num_train: Any = 20000
    num_val: Any = 1000
    num_test: Any = 1000
    num_length_test: Any = 500  # sequences per length for test/acc@len{L}
    batch_size: Any = 64
    eval_batch_size: Any = 128
    seed: Any = 0  # the data's own seed: the same sequences whatever the run's seed


@dataclass
class SeqCopyData(SequenceData):
    """Target at i = input at i - offset: needs relative position only (chance 1/16)."""


@dataclass
class SeqReverseData(SequenceData):
    """Target at i = input at n-1-i (n: the sequence's own length): needs absolute position."""

    name: Any = "seq_reverse"
    task: Any = "reverse"


@dataclass
class SeqProbeData(SequenceData):
    """Every input is the same token, target = its index: can the encoding tell absolute position?"""

    name: Any = "seq_probe"
    task: Any = "position_probe"
