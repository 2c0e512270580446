"""A verified on-disk cache of decoded tensors: written atomically, checked on load.

Decoding the CIFAR-10 ImageFolder copy takes tens of seconds, so the result is
kept beside the data. The cache must never be the reason a run fails or trains
on wrong pixels:

- it is written to a temporary file in the same folder and moved into place
  with ``os.replace`` (atomic on POSIX and Windows), so a run killed mid-write
  leaves the previous cache or none, never a partial one;
- it stores the sha256 of its tensors' bytes beside them, so flipped bytes are
  detected on load;
- a cache that cannot be read or does not verify is reported with a warning
  naming its path and rebuilt; a stale one (the source files changed, or an
  older cache format) is rebuilt quietly;
- it is read with ``torch.load(..., weights_only=True)``: plain dicts, strings
  and tensors only, never arbitrary pickled objects.
"""

from __future__ import annotations

import hashlib
import time
import warnings
from pathlib import Path

import torch

from vitpos.files import atomic_path

FORMAT = 2  # 1: {"fingerprint", "images", "labels"} written in place, without a checksum
STALE_TMP_S = 600  # a temporary file untouched this long belongs to a killed writer


def checksum(tensors: dict[str, torch.Tensor]) -> str:
    """sha256 over each tensor's name, dtype, shape and raw bytes (in name order)."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        digest.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        digest.update(t.view(torch.uint8).reshape(-1).numpy())  # the raw bytes, without a copy
    return digest.hexdigest()


def _warn(path: Path, why: str) -> None:
    warnings.warn(f"decoded-data cache {path} {why}; rebuilding it", RuntimeWarning, stacklevel=3)


def load(path: Path, fingerprint: str) -> dict[str, torch.Tensor] | None:
    """The cached tensors, or None when the cache is missing, stale or damaged (then warns)."""
    if not path.exists():
        return None
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated zip, flipped bytes in the pickle, not a torch file, ...
        _warn(path, f"cannot be read ({type(err).__name__}: {str(err).splitlines()[0][:200]})")
        return None
    if not isinstance(saved, dict):
        _warn(path, f"holds a {type(saved).__name__}, not a cache")
        return None
    if saved.get("format") != FORMAT or saved.get("fingerprint") != fingerprint:
        return None  # an older format, or the source files changed since: stale, not damaged
    tensors = saved.get("tensors")
    if not isinstance(tensors, dict) or not all(isinstance(t, torch.Tensor) for t in tensors.values()):
        _warn(path, "has no tensors")
        return None
    if checksum(tensors) != saved.get("sha256"):
        _warn(path, "does not match its checksum (damaged on disk)")
        return None
    return tensors


def save(path: Path, fingerprint: str, tensors: dict[str, torch.Tensor]) -> None:
    """Write ``tensors`` to ``path`` atomically with their checksum; warn (not fail) if impossible."""
    payload = {"format": FORMAT, "fingerprint": fingerprint, "sha256": checksum(tensors), "tensors": tensors}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_tmp(path)
        with atomic_path(path) as tmp:  # no fsync: should a power cut leave the file hollow, its checksum catches it
            torch.save(payload, tmp)  # by name: torch's own writer, faster than through a Python file object
    except (OSError, RuntimeError) as err:  # read-only folder, disk full (torch.save: a RuntimeError): the run
        # goes on, the next one decodes again
        warnings.warn(
            f"could not write the decoded-data cache {path} ({err}); the next run will decode the images again",
            RuntimeWarning,
            stacklevel=2,
        )


def _remove_stale_tmp(path: Path) -> None:
    """Delete temporary files left by writers killed mid-write; fresh ones may be another process's."""
    now = time.time()
    for tmp in path.parent.glob(f"{path.name}.*.tmp"):
        try:
            if now - tmp.stat().st_mtime > STALE_TMP_S:
                tmp.unlink()
        except OSError:
            pass  # removed meanwhile by another process
