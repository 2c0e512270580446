"""What counts as an image of an ImageFolder copy of CIFAR-10: the one listing of a split folder.

``DIR/train/<class>/*.jpg`` and ``DIR/test/<class>/*.jpg``. Three callers read the same tree
and must agree on it: the config check counts the images (:mod:`vitpos.checks.data`), the
loader decodes them (:mod:`vitpos.data.cifar10`) and the run's identity digests them
(:mod:`vitpos.data.fingerprint`). They all call :func:`scan` (or :func:`list_images`, which
refuses a broken tree), so a file is an image for all three or for none. The rule:

- a class folder is a folder (or a link to one) directly in the split folder that is not hidden;
- an image is a file (or a link to one) directly in a class folder, not hidden, whose name ends
  in one of ``IMAGE_EXTENSIONS``, in any case (``.JPG`` too);
- hidden means a name starting with ``.`` (``.DS_Store``, ``._x.jpg``, ``.ipynb_checkpoints``)
  or ``__MACOSX``; hidden entries are skipped silently, any other entry that is not an image
  (``notes.txt``, a sub-folder, a broken link) is *ignored* and reported by the loader;
- order: class folders by name, files by name in each; labels are the index in ``CLASSES``.

Free of torch: the config check lists the folder before torch loads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from vitpos.errors import DataError

CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
IMG_SIZE = 32
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp")  # what torchvision's decode_image reads as one frame
LAYOUT = (
    "expected layout: DIR/train/<class>/*.jpg and DIR/test/<class>/*.jpg, one folder per class "
    f"({', '.join(CLASSES)}), {IMG_SIZE}x{IMG_SIZE} images"
)
WHERE_TO_POINT = (
    "Point data.root at the folder that holds train/ and test/ "
    "(an ImageFolder copy of CIFAR-10: see the README), or use data=shapes offline."
)


def hidden(name: str) -> bool:
    """A file or folder that is not part of the data set and is skipped without a word."""
    return name.startswith(".") or name == "__MACOSX"


@dataclass(frozen=True)
class Listing:
    """One split folder as :func:`scan` found it.

    ``classes``: the class folders found (sorted); ``files``: (path, index in ``classes``) of
    every image, in order; ``ignored``: the other entries that are not hidden; ``empty``: the
    class folders without an image. ``exists``: whether the split folder is there at all."""

    split_dir: str
    exists: bool
    classes: tuple[str, ...] = ()
    files: tuple[tuple[str, int], ...] = ()
    ignored: tuple[str, ...] = ()
    empty: tuple[str, ...] = ()


def _class_images(class_dir: str) -> tuple[list[str], list[str]]:
    """(image paths, ignored paths) directly in ``class_dir``, by name."""
    with os.scandir(class_dir) as it:  # DirEntry.is_file() needs no stat on most file systems
        entries = sorted((e.name, e.path, e.is_file()) for e in it if not hidden(e.name))
    good = [is_file and name.lower().endswith(IMAGE_EXTENSIONS) for name, _, is_file in entries]
    images = [path for (_, path, _), ok in zip(entries, good) if ok]
    ignored = [path for (_, path, _), ok in zip(entries, good) if not ok]
    return images, ignored


def stamps(split_dir: str) -> tuple[int, ...] | None:
    """The modification times of ``split_dir`` and its folders, which change when an entry is
    added, removed or renamed in them; None when ``split_dir`` is not a folder."""
    try:
        with os.scandir(split_dir) as it:
            inner = sorted((e.name, e.stat().st_mtime_ns) for e in it if e.is_dir())
        return (os.stat(split_dir).st_mtime_ns, *(t for _, t in inner))
    except (FileNotFoundError, NotADirectoryError):
        return None


def scan(root: str | Path, split: str) -> Listing:
    """Every image of ``root/split`` by the rule above, without judging the layout.

    The check, the run's identity and the loader each ask in one run: the listing is kept per
    process until the folders' :func:`stamps` change."""
    split_dir = os.path.join(os.path.expanduser(str(root)), split)
    return _scan(split_dir, stamps(split_dir))


@lru_cache(maxsize=8)
def _scan(split_dir: str, stamps: tuple[int, ...] | None) -> Listing:
    """:func:`scan` of ``split_dir``; ``stamps`` only key the cache. Paths are plain strings:
    building 60,000 Path objects costs about a second."""
    if stamps is None:
        return Listing(split_dir, exists=False)
    with os.scandir(split_dir) as it:
        classes = tuple(sorted(e.name for e in it if e.is_dir() and not hidden(e.name)))
    files, ignored, empty = [], [], []
    for label, name in enumerate(classes):
        images, skipped = _class_images(os.path.join(split_dir, name))
        files += [(path, label) for path in images]
        ignored += skipped
        if not images:
            empty.append(os.path.join(split_dir, name))
    return Listing(split_dir, True, classes, tuple(files), tuple(ignored), tuple(empty))


def list_images(root: str | Path, split: str) -> Listing:
    """:func:`scan`, refusing a tree the data set cannot come from: a missing split folder,
    a missing or extra class folder, a class folder without an image (:class:`DataError`)."""
    listing = scan(root, split)
    if not listing.exists:
        raise DataError(f"data.root={root} has no {split}/ folder ({LAYOUT}).\n{WHERE_TO_POINT}")
    if listing.classes != CLASSES:
        missing = sorted(set(CLASSES) - set(listing.classes))
        extra = sorted(set(listing.classes) - set(CLASSES))
        raise DataError(
            f"{listing.split_dir} should hold one folder per CIFAR-10 class ({', '.join(CLASSES)}); "
            f"missing: {', '.join(missing) or 'none'}; unexpected: {', '.join(extra) or 'none'}.\n{WHERE_TO_POINT}"
        )
    if listing.empty:
        raise DataError(
            f"{len(listing.empty)} class folder(s) hold no image ({', '.join(IMAGE_EXTENSIONS)}): "
            f"{', '.join(listing.empty)}.\nEvery class needs its images ({LAYOUT})."
        )
    return listing
