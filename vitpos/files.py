"""Writing files so that a kill never leaves a torn one: the one atomic-write helper.

Everything vitpos writes that a later run reads back (``last.ckpt``,
``metrics.json``, the decoded-data cache, the run lock) is written to a
temporary file beside its destination and renamed over it with
``os.replace``, which is atomic on POSIX and Windows: a reader sees the old
file or the new one, never half of one.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | Path, *, unique: bool = True, commit: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; when the block ends without an
    error, rename it over ``path`` (only if ``commit``), else delete it.

    ``unique``: a fresh name per writer (``<name>.<random>.tmp``, mode 0644), for
    files several processes may write at once. ``unique=False`` gives the fixed
    name ``<name>.tmp``, for collective writes where every DDP rank must name the
    same file and only rank 0 (``commit``) renames it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if unique:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.", suffix=".tmp")
        os.close(fd)
        tmp = Path(name)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; run and data folders may be shared
    else:
        tmp = path.with_name(f"{path.name}.tmp")
    try:
        yield tmp
        if commit:
            os.replace(tmp, path)
    except BaseException:  # an error or an interrupt: leave no temporary file behind
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)
