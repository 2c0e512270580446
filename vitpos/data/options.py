"""The rules of the image data options, free of torch: :class:`vitpos.data.images.ImageDataModule` runs
them on its own arguments (the config check builds it, nothing loaded) and (:func:`check_split`) on the
images it loaded; the config check runs :func:`check_split` on the images it can count before loading
(:func:`image_counts`).
Each rule is written once, here; each raises :class:`UserError` (a ``ValueError``) naming the option.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from vitpos.config import SCHEMAS, defaults
from vitpos.data.folder import list_images
from vitpos.data.shapes import check_layout
from vitpos.errors import UserError
from vitpos.sizes import as_hw, is_integer

DATASETS = ("cifar10", "shapes")  # data.name of the image task
#: options an image data module takes besides its config file's: where imagefolder's decoded
#: tensors are cached (default: beside the images, vitpos/data/cifar10.py)
MODULE_ONLY = {"cache_dir": None}
FORMATS = ("torchvision", "imagefolder")  # data.format of cifar10
POLICIES = ("none", "trivial", "randaugment")  # data.augment (vitpos.data.augment.policy_transform)
SIZE_SCHEDULES = ("random", "progressive")  # data.size_schedule (vitpos.data.schedule)


def check_image_data(data: dict) -> None:
    """The image data options: ``data.name``, ``data.format`` and ``data.augment``; ``data.train_sizes`` (null, or
    a list of sizes), ``data.size_schedule`` and ``data.size_epochs``; ``data.native_size`` a size (a side or
    ``[h, w]``), and null for generated shapes, whose ``data.img_size`` must hold a grid of whole cells
    (:func:`vitpos.data.shapes.check_layout`). Whether the patches tile a size is the model's rule."""
    name = data["name"]
    if name not in DATASETS:
        raise UserError("data.name", f"unknown data set {name!r}", f"valid: {', '.join(DATASETS)} (data=...)")
    if "format" in data and data["format"] not in FORMATS:  # cifar10's (generated shapes have none)
        raise UserError("data.format", f"unknown {data['format']!r}", f"valid: {', '.join(FORMATS)}")
    if data.get("augment") not in (None, *POLICIES):
        raise UserError("data.augment", f"unknown policy {data['augment']!r}", f"valid: {', '.join(POLICIES)}")
    if name == "shapes":
        check_layout(as_hw(data["img_size"], "data.img_size"), data["cell"])
    sizes = data.get("train_sizes")
    check_train_sizes(sizes)
    check_size_schedule(sizes, data["size_schedule"], data.get("size_epochs"))
    if data.get("native_size") is not None:
        if name == "shapes":
            raise UserError(
                "data.native_size", "generated shapes are drawn at every size", "leave data.native_size=null"
            )
        as_hw(data["native_size"], "data.native_size")


def image_data_options(options: Mapping) -> dict:
    """The options of an image data module: its data set's config file (``options["name"]``, default
    cifar10; the one place each default is written) with ``options`` over it. An option only the
    other data set has is taken and unused (a tool passes ``download=false`` to both); a key no image
    data config has is refused, naming it and the valid ones. ``num_classes`` is the data set's, not an option."""
    name = options.get("name", DATASETS[0])
    known = {key for data_set in DATASETS for key in _config(data_set)} | set(MODULE_ONLY)
    for key in options:
        if key not in known:
            raise UserError(f"data.{key}", "not an option of the image data sets", f"valid: {', '.join(sorted(known))}")
    defaults = _config(name) if name in DATASETS else {}  # an unknown name: check_image_data names it
    return {**MODULE_ONLY, **defaults, **options}


def _config(name: str) -> dict:
    """The data set's options and their defaults (:mod:`vitpos.config.data`), less ``num_classes`` (what the
    data set has)."""
    values = defaults(SCHEMAS[("data", name)])
    return {key: value for key, value in values.items() if key != "num_classes"}


def check_train_sizes(sizes) -> None:
    """``data.train_sizes``: null, or a list of sizes, each a side or an ``[h, w]`` pair."""
    if sizes is None:
        return
    if not isinstance(sizes, Sequence) or isinstance(sizes, str) or not sizes:
        raise UserError(
            "data.train_sizes", f"must be null or a list of sizes, got {sizes!r}", "e.g. [16,24,32] or [16,[16,32],32]"
        )
    for i, r in enumerate(sizes):
        as_hw(r, f"data.train_sizes[{i}]")


def check_size_schedule(sizes, schedule: str, size_epochs) -> None:
    """``data.size_schedule`` and ``data.size_epochs`` against ``data.train_sizes`` (``sizes``);
    ``size_epochs`` may be any sequence (a list, or Hydra's ListConfig)."""
    if schedule not in SIZE_SCHEDULES:
        raise UserError("data.size_schedule", f"unknown {schedule!r}", f"valid: {', '.join(SIZE_SCHEDULES)}")
    if schedule == "progressive" and not sizes:
        raise UserError(
            "data.size_schedule", "progressive needs the sizes to go through", "e.g. data.train_sizes=[16,24,32]"
        )
    if size_epochs is None:
        return
    if schedule != "progressive" or not isinstance(size_epochs, Sequence) or len(size_epochs) != len(sizes or []):
        raise UserError(
            "data.size_epochs",
            f"{size_epochs!r} must give the epochs of each of data.train_sizes={sizes!r}, "
            "with size_schedule=progressive",
            "e.g. data.train_sizes=[16,24,32] data.size_schedule=progressive data.size_epochs=[6,3,3]",
        )
    for i, n in enumerate(size_epochs):
        if not is_integer(n) or n < 1:
            raise UserError(f"data.size_epochs[{i}]", f"{n!r} is not a positive number of epochs", "e.g. [6,3,3]")


@dataclass(frozen=True)
class Counts:
    """The training and test images of a data set, and where they were counted (for the messages)."""

    train: int
    test: int
    where_train: str
    where_test: str


def counts_of(data: dict, train: int, test: int) -> Counts:
    """:class:`Counts` of ``train`` and ``test`` images of the data set ``data`` names."""
    if data.get("name") == "shapes":
        return Counts(train, test, "data.num_train", "data.num_test")
    root = str(Path(str(data.get("root"))).expanduser())
    return Counts(train, test, root, root)


def image_counts(data: dict) -> Counts | None:
    """The image counts of ``data``'s data set; None before CIFAR-10 is downloaded (nothing to count yet)."""
    if data.get("name") == "shapes":
        return counts_of(data, data["num_train"], data["num_test"])
    root = Path(str(data.get("root"))).expanduser()
    if data.get("format") == "imagefolder":
        return counts_of(data, *(len(list_images(root, split).files) for split in ("train", "test")))
    return counts_of(data, 50_000, 10_000) if (root / "cifar-10-batches-py").is_dir() else None


def check_split(data: dict, counts: Counts) -> None:
    """``data.val_size`` against the training images, ``data.train_subset`` against what the
    validation split leaves, ``data.test_subset`` against the test images. (``eval.test_subset`` is
    an upper bound, never refused: a smaller test set is evaluated whole.)"""
    val = data.get("val_size") or 0
    if val >= counts.train:
        raise UserError(
            "data.val_size",
            f"{val} leaves no training images out of {counts.train} ({counts.where_train})",
            f"use 0 <= data.val_size < {counts.train}",
        )
    left, subset = counts.train - val, data.get("train_subset")
    if subset is not None and subset > left:
        raise UserError(
            "data.train_subset",
            f"{subset} is more than the {left} training images left after data.val_size={val} ({counts.where_train})",
            f"use data.train_subset <= {left}, or null for all of them",
        )
    subset = data.get("test_subset")
    if subset is not None and subset > counts.test:
        raise UserError(
            "data.test_subset",
            f"{subset} is more than the {counts.test} test images ({counts.where_test})",
            f"use data.test_subset <= {counts.test}, or null",
        )
    # eval.test_subset is "at most": a test set smaller than it is evaluated whole (limit_extrapolation)
