"""Writing files so that a kill or a full disk never leaves a torn one: the one atomic-write helper,
and the one wording of a write the disk refused.

Everything vitpos writes that a later run reads back (``last.ckpt`` and the best checkpoint,
``metrics.json``, the decoded-data cache, the run lock) is written to a temporary file beside its
destination and renamed over it with ``os.replace``, which is atomic on POSIX and Windows: a reader
sees the old file or the new one, never half of one. A write that fails part-way (no space left,
the file-size limit of ``ulimit -f``, a read-only folder) removes its temporary file, leaves the
previous file as it was, and raises a :class:`WriteError`: one line naming the path and the cause.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: errno -> (what happened, what to do): the failures of a write that the user, not the program, can fix
DISK_ERRORS = {
    errno.ENOSPC: ("no space left on the device", "free space on it"),
    errno.EDQUOT: ("disk quota exceeded", "free space or raise the quota"),
    errno.EFBIG: ("file larger than the file-size limit (ulimit -f)", "raise it: ulimit -f unlimited"),
    errno.EROFS: ("read-only file system", "write elsewhere (run.root=<dir>) or remount it read-write"),
    errno.EACCES: ("permission denied", "make the folder writable or write elsewhere (run.root=<dir>)"),
    errno.EPERM: ("operation not permitted", "make the folder writable or write elsewhere (run.root=<dir>)"),
}


def cause(err: OSError) -> str:
    """What an ``OSError`` says happened, with its errno's name: ``no space left on the device
    [ENOSPC]`` (the wording of :data:`DISK_ERRORS` where it has one, else the system's)."""
    what = DISK_ERRORS[err.errno][0] if err.errno in DISK_ERRORS else (err.strerror or "").lower()
    return f"{what} [{errno.errorcode.get(err.errno, type(err).__name__)}]"


class WriteError(OSError):
    """A write the disk refused (:data:`DISK_ERRORS`), worded as one line
    ``disk: cannot write <path>: <cause> [<ERRNO>] (<fix>, then rerun ...)``. Still an ``OSError``
    with the original errno, so that code which tolerates a failed optional write (the
    decoded-data cache) still does; a training run reports it as a user error (exit code 2,
    :class:`vitpos.run.folder.DiskFault`)."""

    def __init__(self, path: str | Path, err: OSError):
        fix = DISK_ERRORS[err.errno][1]
        self.path = Path(path)
        self.message = (
            f"disk: cannot write {path}: {cause(err)} ({fix}, then rerun the same "
            "command: a run continues from its last checkpoint, the files before this write are intact)"
        )
        super().__init__(err.errno, self.message)

    def __str__(self) -> str:
        return self.message


@contextmanager
def disk_errors(path: str | Path) -> Iterator[None]:
    """Turn an ``OSError`` of :data:`DISK_ERRORS` raised in the block into a :class:`WriteError`
    naming the file it names (else ``path``); any other error passes unchanged."""
    try:
        yield
    except WriteError:
        raise
    except OSError as err:
        if err.errno not in DISK_ERRORS:
            raise
        raise WriteError(err.filename or path, err) from err


@contextmanager
def atomic_path(path: str | Path, *, unique: bool = True, commit: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; when the block ends without an
    error, rename it over ``path`` (only if ``commit``), else delete it.

    ``unique``: a fresh name per writer (``<name>.<random>.tmp``, mode 0644), for
    files several processes may write at once. ``unique=False`` gives the fixed
    name ``<name>.tmp``, for collective writes where every DDP rank must name the
    same file and only rank 0 (``commit``) renames it. A write the disk refuses is a
    :class:`WriteError` naming ``path`` (:func:`disk_errors`).
    """
    path = Path(path)
    with disk_errors(path):
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
        except BaseException as err:  # an error or an interrupt: leave no temporary file behind
            try:
                tmp.unlink(missing_ok=True)
            except OSError:  # a read-only folder: nothing was written into it either
                pass
            if isinstance(err, OSError) and err.errno in DISK_ERRORS and not isinstance(err, WriteError):
                raise WriteError(path, err) from err  # the destination, not the temporary name
            raise


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)
