"""The data path: one epoch of augmented training batches, vitpos vs torchvision.

vitpos: the decoded set in memory as uint8 (decoded once, then cached on disk
by ``load_imagefolder``); each batch is one index op, then random crop with
padding 4 + horizontal flip + normalization on the whole batch
(``ImageDataModule.prepare_batch``). Peer: torchvision ``ImageFolder`` +
``DataLoader`` with the equivalent PIL transforms (``RandomCrop(32, padding=4)``,
``RandomHorizontalFlip``, ``ToTensor``, ``Normalize``) on the same files, at its
best worker count among 0, 1, 2. Both yield normalized float batches of 128.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Subset
from torchvision import datasets, transforms

from vitpos.data.cifar10 import MEAN, STD, load_imagefolder
from vitpos.data.images import ImageDataModule

from .timing import header, table


def epoch_seconds(make_iter, prepare=None) -> float:
    start = time.perf_counter()
    for batch in make_iter():
        if prepare is not None:
            batch = prepare(batch)
    return time.perf_counter() - start


def run(quick: bool, root: str = "data/cifar10", batch: int = 128) -> None:
    root_path = Path(root)
    if not (root_path / "train").is_dir():
        print(f"\n## data: skipped: no CIFAR-10 ImageFolder copy at {root} (data_root=DIR)")
        return
    n = 2000 if quick else 50000
    start = time.perf_counter()
    images, labels = load_imagefolder(root_path, "train", progress=False)
    load_s = time.perf_counter() - start
    keep = torch.randperm(len(images), generator=torch.Generator().manual_seed(0))[:n]

    dm = ImageDataModule(name="cifar10", format="imagefolder", root=root, batch_size=batch)
    dm.train = (images[keep], labels[keep])
    times = {"vitpos in-memory + batch augmentation": epoch_seconds(
        dm.train_dataloader, lambda b: dm.prepare_batch(b, train=True))}  # fmt: skip

    tf = transforms.Compose([
        transforms.RandomCrop(32, padding=4), transforms.RandomHorizontalFlip(),
        transforms.ToTensor(), transforms.Normalize(MEAN, STD),
    ])  # fmt: skip
    folder = datasets.ImageFolder(str(root_path / "train"), transform=tf)
    subset = Subset(folder, keep.tolist())  # the same images (both list files in sorted order)
    peer_times = {}
    for workers in (0, 1, 2):
        loader = DataLoader(subset, batch_size=batch, shuffle=True, num_workers=workers, drop_last=True)
        peer_times[workers] = epoch_seconds(lambda: iter(loader))  # noqa: B023
    best = min(peer_times, key=peer_times.get)
    for w, t in peer_times.items():
        times[f"torchvision ImageFolder + DataLoader, {w} workers"] = t
    peer = f"torchvision ImageFolder + DataLoader, {best} workers"
    header(f"data path: one epoch of {n} augmented CIFAR-10 images, batch {batch}")
    print(f"(vitpos: decoded set loaded in {load_s:.1f} s, once per process; cached on disk after the first decode)")
    rows = [[k, f"{t:.2f}", f"{n / t:,.0f}", f"{times[peer] / t:.2f}x"] for k, t in times.items()]
    table(["loader", "s / epoch", "img/s", f"vs {peer} (best)"], rows)
