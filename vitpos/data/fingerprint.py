"""What a run was trained on, as a short digest: part of the run's identity.

Two copies of the same data set give the same fingerprint wherever they lie
(moving the data keeps the run); a copy with other images gives another one (a
different run, or ``resume=auto`` refuses it). Generated data (``shapes``, the
toy sequences) is fully defined by its config, so it has no fingerprint.

- ImageFolder (``data.format=imagefolder``): every image below ``train/`` and
  ``test/`` (what counts as one: :mod:`vitpos.data.folder`, the rule the loader
  reads by) with its class folder and size in bytes (not its time stamps, which
  a copy changes). Files the loader does not read (``notes.txt``, hidden files)
  do not change the fingerprint;
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

from .folder import scan, stamps

SPLITS = ("train", "test")
OFFICIAL = "cifar10-official"


def data_fingerprint(data: dict) -> str | None:
    """12 hex digits for the data set ``data`` (a plain ``data`` config) names, or None for generated data."""
    if data.get("name") != "cifar10" or data.get("root") is None:
        return None
    if data.get("format") != "imagefolder":
        return OFFICIAL
    root = str(Path(str(data["root"])).expanduser())  # as the check and the loader name it: one listing
    return _digest(root, tuple(stamps(os.path.join(root, split)) for split in SPLITS))


@lru_cache(maxsize=16)
def _digest(root: str, folder_stamps: tuple) -> str | None:
    """The digest of every image below ``root``'s splits; ``folder_stamps`` (the folders' times,
    :func:`vitpos.data.folder.stamps`) only key the in-process cache, so that a change to the
    files is seen. A tree the loader would refuse (a class folder missing) still has a digest:
    the check and the loader refuse it."""
    digest, count = hashlib.sha256(), 0
    for split in SPLITS:
        listing = scan(root, split)
        if not listing.exists:
            continue
        digest.update(f"[{split}]".encode())
        for path, label in listing.files:
            size = os.stat(path).st_size
            digest.update(f"{listing.classes[label]}/{os.path.basename(path)}:{size};".encode())
            count += 1
    return digest.hexdigest()[:12] if count else None
