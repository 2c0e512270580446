"""What a run was trained on, as a short digest: part of the run's identity (issue 19).

Two copies of the same data set give the same fingerprint wherever they lie
(moving the data keeps the run); a copy with other files gives another one (a
different run, or ``resume=auto`` refuses it). Generated data (``shapes``, the
toy sequences) is fully defined by its config, so it has no fingerprint.

- ImageFolder (``data.format=imagefolder``): every non-hidden file below
  ``train/`` and ``test/`` with its class folder and size in bytes (not its
  time stamps, which a copy changes);
- the official release (``data.format=torchvision``): the release's name,
  ``cifar10-official``. torchvision checks the archive's MD5 itself, and a name
  that does not depend on the files keeps a run's folder the same before and
  after the first run downloads them.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

SPLITS = ("train", "test")
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp")  # what torchvision's decode_image reads as one frame
OFFICIAL = "cifar10-official"


def data_fingerprint(data: dict) -> str | None:
    """12 hex digits for the data set ``data`` (a plain ``data`` config) names, or None for generated data."""
    if data.get("name") != "cifar10" or data.get("root") is None:
        return None
    if data.get("format") != "imagefolder":
        return OFFICIAL
    folders = [Path(str(data["root"])).expanduser() / split for split in SPLITS]
    # the times of the split and class folders change when files are added, removed or renamed in them
    subfolders = [d for f in folders if f.is_dir() for d in sorted(f.iterdir()) if d.is_dir()]
    stamps = tuple(d.stat().st_mtime_ns for d in [*filter(Path.is_dir, folders), *subfolders])
    return _digest(tuple(str(f.resolve()) for f in folders), stamps)


def _hidden(name: str) -> bool:
    return name.startswith(".") or name == "__MACOSX"


@lru_cache(maxsize=16)
def _digest(folders: tuple[str, ...], stamps: tuple) -> str | None:
    """The digest of every file below ``folders``; ``stamps`` (the folders' times) only key the
    in-process cache, so that a change to the files is seen."""
    digest, count = hashlib.sha256(), 0
    for top in folders:
        if not os.path.isdir(top):
            continue
        digest.update(f"[{os.path.basename(top)}]".encode())
        for folder, dirs, files in sorted(os.walk(top)):
            dirs[:] = sorted(d for d in dirs if not _hidden(d))
            rel = os.path.relpath(folder, top)
            for name in sorted(f for f in files if not _hidden(f)):
                size = os.stat(os.path.join(folder, name)).st_size
                digest.update(f"{rel}/{name}:{size};".encode())
                count += 1
    return digest.hexdigest()[:12] if count else None
