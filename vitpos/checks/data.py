"""Checks of ``data.*`` and the evaluation sizes: paths, sizes the patches tile, sizes the data set can give,
the memory each evaluation size needs (free of torch), and last the data module itself, built unloaded.

Each rule is owned one layer down and only called here: :mod:`vitpos.data.options` (image data, splits),
:func:`vitpos.data.folder.list_images` (the loader's own listing), :mod:`vitpos.data.shapes` (the sizes
``make_shapes`` can draw) and :mod:`vitpos.eval_memory` (the memory rule ``python -m vitpos.extrapolate``
applies too), so an evaluation at 4096 px is refused before training, not hours in.
"""

from __future__ import annotations

from pathlib import Path

from vitpos.data.folder import list_images
from vitpos.data.options import Counts, check_size, check_split, check_train_sizes, counts_of
from vitpos.data.shapes import can_draw, check_drawable, check_layout
from vitpos.errors import UserError
from vitpos.eval_memory import run_memory_problem
from vitpos.sizes import default_resolutions


def check_data_paths(data: dict, image: bool) -> None:
    """``data.root``: a folder; with ``data.format=imagefolder``, one holding ``train/`` and ``test/``."""
    if not image or data.get("root") is None:
        return
    path = Path(str(data["root"])).expanduser()
    if path.is_file():
        raise UserError("data.root", f"{path} is a file, not a folder", "point data.root at the dataset folder")
    if data.get("format") == "imagefolder" and (missing := [s for s in ("train", "test") if not (path / s).is_dir()]):
        raise UserError(
            "data.root",
            f"{path} has no {' or '.join(f'{s}/' for s in missing)} folder",
            "an ImageFolder tree DIR/train/<class>/*.jpg and DIR/test/<class>/*.jpg; "
            "the README's section 'Train on CIFAR-10' says where to get one",
        )


#: ``eval.resolutions``'s default: sizes around the training size that the patches tile
AUTO = "auto"


def check_sizes(c: dict) -> None:
    """The sizes against ``model.patch_size``, which the data module cannot know: each ``data.train_sizes`` entry
    (:func:`check_train_sizes`), ``data.img_size`` and each ``eval.resolutions`` size (:func:`check_size`) and,
    for ``data=shapes``, its generator (:func:`check_layout`, :func:`check_drawable`). ``auto`` passes:
    :func:`eval_resolutions` makes it tiled and drawable. The data set's other rules are its constructor's
    (:func:`check_image_data`), which :func:`check_data_module` runs."""
    patch, data = c["model"]["patch_size"], c["data"]  # an integer >= 1 (vitpos.checks.options)
    check_train_sizes(data.get("train_sizes"), patch)
    check_size(data.get("img_size"), "data.img_size", patch)
    shapes = data["name"] == "shapes"
    if shapes:
        check_layout(data["img_size"], data["cell"], patch)
    resolutions = (c.get("eval") or {}).get("resolutions") or []
    if resolutions == AUTO:
        return
    if not isinstance(resolutions, list):
        what = f"must be a list of sizes or {AUTO}, got {resolutions!r}"
        raise UserError("eval.resolutions", what, "e.g. [16,[16,32],32]")
    for i, r in enumerate(resolutions):
        check_size(r, f"eval.resolutions[{i}]", patch)
        if shapes:
            check_drawable(r, data["img_size"], data["cell"], f"eval.resolutions[{i}]", patch)


def eval_resolutions(c: dict) -> list:
    """The sizes ``eval.resolutions`` names: the list given, or for ``auto`` :func:`vitpos.sizes.default_resolutions` of
    ``data.img_size`` and ``model.patch_size`` (a timm model's filled in), e.g. ``[16, 24, 32, 40, 48, 64]`` for 4 px
    patches at 32 px; for ``data=shapes``, only those its generator can draw (:func:`vitpos.data.shapes.can_draw`)."""
    data, resolutions = c["data"], (c.get("eval") or {}).get("resolutions")
    if resolutions != AUTO:
        return list(resolutions or [])
    sizes = default_resolutions(data["img_size"], int(c["model"]["patch_size"]))
    if data.get("name") == "shapes":
        sizes = [s for s in sizes if can_draw(s, data["img_size"], data["cell"])]
    return sizes


def image_counts(data: dict) -> Counts | None:
    """The image counts of ``data``'s data set; None before CIFAR-10 is downloaded (nothing to count yet)."""
    if data.get("name") == "shapes":
        return counts_of(data, data["num_train"], data["num_test"])
    root = Path(str(data.get("root"))).expanduser()
    if data.get("format") == "imagefolder":
        return counts_of(data, *(len(list_images(root, split).files) for split in ("train", "test")))
    return counts_of(data, 50_000, 10_000) if (root / "cifar-10-batches-py").is_dir() else None


def check_data_counts(c: dict) -> Counts | None:
    """:func:`check_split` on the counted images, before training; returns the counts (None: not countable yet)."""
    if (counts := image_counts(c["data"])) is not None:
        check_split(c["data"], counts)
    return counts


def check_memory(c: dict, image: bool, counts: Counts | None = None) -> None:
    """Refuse a test size (the training size and every ``eval`` size) whose evaluation would not fit
    (``counts``: the data set's, from :func:`check_data_counts`)."""
    if (problem := run_memory_problem(c, "res" if image else "len", counts.test if counts else None)) is not None:
        raise problem


def check_data_module(c: dict, image: bool) -> None:
    """The run's data module built as training builds it (:func:`vitpos.data.make_datamodule`, nothing loaded):
    its constructor refuses an unknown ``data.*`` key and the rules it owns."""
    from vitpos.data import make_datamodule

    make_datamodule(c["data"], image, int(c.get("seed") or 0))
