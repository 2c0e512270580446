"""CIFAR-10 as uint8 tensors: the official release via torchvision, or an
ImageFolder copy (``train/<class>/*.jpg``, ``test/<class>/*.jpg``), decoded
once and cached on disk beside the data."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch
from torchvision.io import ImageReadMode, decode_image, read_file

CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


class DatasetNotFoundError(RuntimeError):
    """CIFAR-10 is neither on disk nor downloadable; the message lists the ways out."""


def load_official(root: str | Path, train: bool, download: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """The official python release through torchvision: (N, 3, 32, 32) uint8, (N,) int64."""
    from torchvision.datasets import CIFAR10

    root = Path(root)
    try:
        ds = CIFAR10(str(root), train=train, download=download)
    except Exception as err:  # network errors, missing files, bad archive
        raise DatasetNotFoundError(
            f"CIFAR-10 is not in {root.resolve()}/cifar-10-batches-py and could not be downloaded "
            f"({type(err).__name__}: {err}).\nWays out:\n"
            f"  1. place the official archive cifar-10-python.tar.gz in {root.resolve()} and run again;\n"
            "  2. use an ImageFolder copy: data.format=imagefolder data.root=DIR "
            "(DIR holds train/<class>/*.jpg and test/<class>/*.jpg; this workplace has one in "
            "../shared/datasets, unpack it with ../shared/datasets/unpack-cifar10.sh data);\n"
            "  3. use the offline generated data set: data=shapes"
        ) from None
    images = torch.from_numpy(ds.data).permute(0, 3, 1, 2).contiguous()  # (N, 3, 32, 32)
    return images, torch.tensor(ds.targets, dtype=torch.long)


def _list_images(split_dir: Path) -> list[tuple[Path, int]]:
    found = sorted(p.name for p in split_dir.iterdir() if p.is_dir()) if split_dir.is_dir() else []
    if list(found) != sorted(CLASSES):
        raise DatasetNotFoundError(
            f"{split_dir} should hold one folder per CIFAR-10 class ({', '.join(CLASSES)}); "
            f"found {found or 'nothing'}.\n"
            "Point data.root at the folder that holds train/ and test/ "
            "(../shared/datasets/unpack-cifar10.sh data prints it), or use data=shapes offline."
        )
    files = []
    for label, name in enumerate(CLASSES):
        files += [(p, label) for p in sorted((split_dir / name).iterdir()) if p.is_file()]
    return files


def _fingerprint(files: list[tuple[Path, int]]) -> str:
    digest = hashlib.sha256()
    for path, label in files:
        st = path.stat()
        digest.update(f"{path.name}:{label}:{st.st_size}:{st.st_mtime_ns};".encode())
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
    the data folder is read-only) and rebuilt when the files change.
    """
    root = Path(root)
    if not root.is_dir():
        raise DatasetNotFoundError(
            f"data.root={root} does not exist. Unpack the CIFAR-10 copy with "
            "`bash ../shared/datasets/unpack-cifar10.sh data` and pass the folder it prints, or use data=shapes."
        )
    files = _list_images(root / split)
    fingerprint = _fingerprint(files)
    cache = _cache_path(root, split, cache_dir)
    if cache.exists():
        saved = torch.load(cache, weights_only=True)
        if saved.get("fingerprint") == fingerprint:
            return saved["images"], saved["labels"]
    from tqdm.auto import tqdm

    images = torch.empty(len(files), 3, 32, 32, dtype=torch.uint8)
    chunk = 2048
    bar = tqdm(range(0, len(files), chunk), desc=f"decoding {split} images once", disable=not progress)
    for start in bar:
        batch = files[start : start + chunk]
        decoded = decode_image_batch([read_file(str(p)) for p, _ in batch])
        images[start : start + len(batch)] = decoded
    labels = torch.tensor([label for _, label in files], dtype=torch.long)
    cache.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"fingerprint": fingerprint, "images": images, "labels": labels}, cache)
    return images, labels


def decode_image_batch(raw: list[torch.Tensor]) -> torch.Tensor:
    out = [decode_image(r, mode=ImageReadMode.RGB) for r in raw]
    bad = [i for i, im in enumerate(out) if im.shape != (3, 32, 32)]
    if bad:
        raise ValueError(f"expected 32x32 CIFAR images, got {out[bad[0]].shape} (and {len(bad) - 1} more)")
    return torch.stack(out)  # (B, 3, 32, 32)
