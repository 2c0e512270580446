"""CIFAR-10 as uint8 tensors: the official release via torchvision, or an
ImageFolder copy (``train/<class>/*.jpg``, ``test/<class>/*.jpg``), decoded
once and cached on disk beside the data (atomically, with a checksum: see
tensor_cache.py).

Bad input stops with a DataError naming the files and the fix, never a bare
decoder traceback: every unusable image (truncated, not an image, not 32x32)
is collected and reported together, and missing or empty class folders are
refused. Bad images stop the run rather than being skipped, because skipping
would silently change the data set and so the numbers compared across runs."""

from __future__ import annotations

import hashlib
import os
import re
import warnings
from pathlib import Path

import torch
from torchvision.io import ImageReadMode, decode_image, read_file

from vitpos.errors import DataError, DatasetNotFoundError  # noqa: F401  (raised here, imported from here by callers)

from . import tensor_cache
from .folder import CLASSES, IMAGE_EXTENSIONS, IMG_SIZE, LAYOUT, list_images  # noqa: F401  (CLASSES: for callers)

MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


def load_official(root: str | Path, train: bool, download: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """The official python release through torchvision: (N, 3, 32, 32) uint8, (N,) int64."""
    from torchvision.datasets import CIFAR10

    root = Path(root)
    if root.exists() and not root.is_dir():
        raise DataError(
            f"data.root={root} is a file, not a folder. Point data.root at the folder that holds (or will "
            "receive) cifar-10-batches-py, or at an ImageFolder copy with data.format=imagefolder, or use data=shapes."
        )
    try:
        ds = CIFAR10(str(root), train=train, download=download)
    except Exception as err:  # network errors, missing files, bad archive
        raise DatasetNotFoundError(
            f"CIFAR-10 is not in {root.resolve()}/cifar-10-batches-py and could not be downloaded "
            f"({type(err).__name__}: {err}).\nWays out:\n"
            f"  1. place the official archive cifar-10-python.tar.gz in {root.resolve()} and run again;\n"
            "  2. use an ImageFolder copy: data.format=imagefolder data.root=DIR "
            "(DIR holds train/<class>/*.jpg and test/<class>/*.jpg; the README says where to get one);\n"
            "  3. use the offline generated data set: data=shapes"
        ) from None
    images = torch.from_numpy(ds.data).permute(0, 3, 1, 2).contiguous()  # (N, 3, 32, 32)
    return images, torch.tensor(ds.targets, dtype=torch.long)


SHOW = 5  # paths listed in an error or warning


def _list_images(root: Path, split: str) -> list[tuple[str, int]]:
    """Every image file of ``root/split`` with its class index, in a fixed order
    (:func:`vitpos.data.folder.list_images`: the rule of what counts as an image).

    Hidden files are skipped silently; other entries that are not images (``notes.txt``)
    are skipped with one warning; a missing, extra or empty class folder is refused.
    """
    listing = list_images(root, split)
    ignored = listing.ignored
    if ignored:
        warnings.warn(
            f"ignored {len(ignored)} {'entry' if len(ignored) == 1 else 'entries'} without an image extension "
            f"({', '.join(IMAGE_EXTENSIONS)}) "
            f"in {listing.split_dir}: {', '.join(ignored[:SHOW])}{' ...' if len(ignored) > SHOW else ''}",
            stacklevel=3,
        )
    return list(listing.files)


def _fingerprint(files: list[tuple[str, int]]) -> str:
    digest = hashlib.sha256()
    digest.update(f"{IMG_SIZE};".encode())
    for path, label in files:
        st = os.stat(path)
        digest.update(f"{os.path.basename(path)}:{label}:{st.st_size}:{st.st_mtime_ns};".encode())
    return digest.hexdigest()


def _cache_path(root: Path, split: str, cache_dir: str | Path | None) -> Path:
    name = f".vitpos-{split}-uint8.pt"
    if cache_dir is None and os.access(root, os.W_OK):
        return root / name
    tag = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:12]
    return Path(cache_dir or "data/cache") / f"{tag}{name}"


def load_imagefolder(
    root: str | Path, split: str, cache_dir: str | Path | None = None, progress: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Decode ``root/split/<class>/*`` once into (N, 3, 32, 32) uint8 + labels.

    The decoded tensors are cached beside the data (or in ``cache_dir`` when
    the data folder is read-only), verified by checksum on every load, and
    rebuilt when the files change or the cache is damaged (see tensor_cache).
    Raises DataError naming the files when some cannot be used.
    """
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise DataError(
            f"data.root={root} is a file, not a folder. Point data.root at the folder that holds "
            f"train/ and test/ ({LAYOUT}), or use data=shapes."
        )
    if not root.is_dir():
        raise DatasetNotFoundError(
            f"data.root={root} does not exist. Point it at an ImageFolder copy of CIFAR-10 "
            "(DIR/train/<class>/*.jpg, DIR/test/<class>/*.jpg; the README says where to get one), or use data=shapes."
        )
    files = _list_images(root, split)
    fingerprint = _fingerprint(files)
    cache = _cache_path(root, split, cache_dir)
    cached = tensor_cache.load(cache, fingerprint)
    if cached is not None:
        return cached["images"], cached["labels"]
    images = _decode_all(files, root / split, progress)
    labels = torch.tensor([label for _, label in files], dtype=torch.long)
    tensor_cache.save(cache, fingerprint, {"images": images, "labels": labels})
    return images, labels


def _why(err: Exception) -> str:
    """torchvision's message without its "decode_jpeg, x.cpp:171, " prefix, on one line."""
    return re.sub(r"^\w+, \S+:\d+, ", "", str(err).splitlines()[0])[:120]


def _read(path: str) -> torch.Tensor | str:
    """The file's bytes as a uint8 tensor, or why they cannot be read."""
    try:
        return read_file(path)
    except (RuntimeError, OSError) as err:  # empty, unreadable, vanished
        return f"cannot be read ({_why(err)})"


def _decode(raw: torch.Tensor | str) -> torch.Tensor | str:
    """The (3, 32, 32) RGB image in ``raw``, or why it cannot be used."""
    if isinstance(raw, str):
        return raw
    try:
        image = decode_image(raw, mode=ImageReadMode.RGB)
    except (RuntimeError, ValueError) as err:  # truncated, or not an image at all
        return f"cannot be decoded ({_why(err)})"
    if image.shape != (3, IMG_SIZE, IMG_SIZE):
        return f"is {image.shape[-1]}x{image.shape[-2]}, not {IMG_SIZE}x{IMG_SIZE}"
    return image


def _decode_all(files: list[tuple[str, int]], split_dir: Path, progress: bool) -> torch.Tensor:
    """Decode every file into (N, 3, 32, 32) uint8; collect all bad files and report them in one error."""
    from tqdm.auto import tqdm

    images = torch.empty(len(files), 3, IMG_SIZE, IMG_SIZE, dtype=torch.uint8)
    bad: list[str] = []
    chunk = 2048
    bar = tqdm(range(0, len(files), chunk), desc=f"decoding {split_dir.name} images once", disable=not progress)
    for start in bar:
        paths = [path for path, _ in files[start : start + chunk]]
        raw = [_read(path) for path in paths]  # all reads, then all decodes: ~15% faster than interleaved
        out = [_decode(r) for r in raw]
        bad += [f"{path} {why}" for path, why in zip(paths, out) if isinstance(why, str)]
        if not bad:  # once one is bad the run stops anyway: keep only collecting
            torch.stack(out, out=images[start : start + len(out)])  # (B, 3, 32, 32), written in place
    if bad:
        raise DataError(
            f"{len(bad)} of {len(files)} files in {split_dir} cannot be used as {IMG_SIZE}x{IMG_SIZE} images; "
            f"the first {min(len(bad), SHOW)}:\n  " + "\n  ".join(bad[:SHOW]) + "\n"
            "Delete or replace these files (or move them out of the class folders), then run again."
        )
    return images
