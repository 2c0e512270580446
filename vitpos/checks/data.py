"""The data half of the config check: the data module built as training builds it (nothing loaded) and the
images counted on disk; after the network, the sizes it meets besides its training size and the memory of each
evaluation (:mod:`vitpos.eval_memory`), so an evaluation at 4096 px is refused before training, not hours in.
"""

from __future__ import annotations

from pathlib import Path

from vitpos.data.options import check_split, image_counts
from vitpos.data.shapes import drawn
from vitpos.errors import UserError
from vitpos.eval_memory import run_memory_problem
from vitpos.sizes import as_hw, default_resolutions, patch_grid

#: ``eval.resolutions``'s default: sizes around the training size that the patches tile
AUTO = "auto"


def check_data(c: dict, image: bool):
    """``data.root`` (with ``data.format=imagefolder``, a folder of ``train/`` and ``test/``), the data module
    (its constructor refuses its options), then the image counts against the splits. Returns the module and the
    counts (None: a sequence task, or CIFAR-10 not downloaded yet)."""
    from vitpos.data import make_datamodule

    data = c["data"]
    path = Path(str(data.get("root"))).expanduser()
    if image and data.get("root") is not None and path.is_file():
        raise UserError("data.root", f"{path} is a file, not a folder", "point data.root at the dataset folder")
    imagefolder = image and data.get("root") is not None and data.get("format") == "imagefolder"
    if imagefolder and (missing := [s for s in ("train", "test") if not (path / s).is_dir()]):
        raise UserError(
            "data.root",
            f"{path} has no {' or '.join(f'{s}/' for s in missing)} folder",
            "an ImageFolder tree DIR/train/<class>/*.jpg and DIR/test/<class>/*.jpg; "
            "the README's section 'Train on CIFAR-10' says where to get one",
        )
    module = make_datamodule(data, image, int(c.get("seed") or 0))
    if image and (counts := image_counts(data)) is not None:
        check_split(data, counts)
        return module, counts
    return module, None


def check_evaluation(c: dict, image: bool, counts) -> list | None:
    """Each size of ``data.train_sizes`` and ``eval.resolutions`` the patches tile (:func:`vitpos.sizes.patch_grid`;
    a test size ``data=shapes`` cannot draw is refused by :func:`eval_resolutions`), then the memory of the test at
    each size (``counts``: :func:`check_data`'s). Returns the test sizes of an image task (``auto`` filled in), None
    for a sequence task."""
    data, resolutions = c["data"], None
    if image:
        patch, resolutions = c["model"]["patch_size"], eval_resolutions(c)
        tested = {f"eval.resolutions[{i}]": as_hw(s, f"eval.resolutions[{i}]") for i, s in enumerate(resolutions)}
        trained = {f"data.train_sizes[{i}]": as_hw(s) for i, s in enumerate(data.get("train_sizes") or [])}
        for option, size in {**trained, **tested}.items():  # each size as (h, w), converted once above
            patch_grid(size, patch, option)
        c = {**c, "eval": {**(c.get("eval") or {}), "resolutions": resolutions}}
    if (problem := run_memory_problem(c, "res" if image else "len", counts.test if counts else None)) is not None:
        raise problem
    return resolutions


def eval_resolutions(c: dict) -> list:
    """The sizes ``eval.resolutions`` names: the list given, or for ``auto`` :func:`vitpos.sizes.default_resolutions`
    of ``data.img_size`` and ``model.patch_size`` (a timm model's filled in), e.g. ``[16, 24, 32, 40, 48, 64]`` for
    4 px patches at 32 px; for ``data=shapes``, only those its generator can draw (:func:`vitpos.data.shapes.drawn`)."""
    data, resolutions = c["data"], (c.get("eval") or {}).get("resolutions")
    if resolutions != AUTO and not isinstance(resolutions, list | None):
        what = f"must be a list of sizes or {AUTO}, got {resolutions!r}"
        raise UserError("eval.resolutions", what, "e.g. [16,[16,32],32]")
    patch, img_size = int(c["model"]["patch_size"]), as_hw(data["img_size"], "data.img_size")
    sizes = default_resolutions(img_size, patch) if resolutions == AUTO else list(resolutions or [])
    if data.get("name") != "shapes":
        return sizes
    named = {f"eval.resolutions[{i}]": as_hw(s, f"eval.resolutions[{i}]") for i, s in enumerate(sizes)}
    kept = drawn(named, img_size, data["cell"], patch, refuse=resolutions != AUTO)
    return [s for s, option in zip(sizes, named) if option in kept]
