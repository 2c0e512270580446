"""One rule for what counts as an image of an ImageFolder tree (vitpos/data/folder.py), read by
all three of its readers: the config check's count, the loader and the run's data fingerprint.

Each edge case is put into a tiny tree (10 classes x 1 image) and every reader is asked: the
count the check makes, the files the loader reads, whether the fingerprint moves.
"""

import hashlib
import os
import warnings

import numpy as np
import pytest
from conftest import require_cifar
from PIL import Image

from vitpos.data.cifar10 import load_imagefolder
from vitpos.data.fingerprint import data_fingerprint
from vitpos.data.folder import CLASSES, list_images, scan
from vitpos.data.options import image_counts
from vitpos.errors import DataError

#: the fingerprint of the committed CIFAR-10 copy: run folders of the committed runs depend on it
CIFAR10_FINGERPRINT = "1e158d4fac4b"


def _png(path, seed=0):
    pixels = np.random.default_rng(seed).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path, "PNG")


def _tree(root):
    for split in ("train", "test"):
        for label, name in enumerate(CLASSES):
            (root / split / name).mkdir(parents=True)
            _png(root / split / name / "0.png", seed=label)
    return root


def readers(root):
    """What each reader makes of ``root``: (images the check counts in train/, files the loader
    reads from train/, the data fingerprint)."""
    counts = image_counts({"name": "cifar10", "format": "imagefolder", "root": str(root)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the loader's word on ignored entries
        images, _ = load_imagefolder(root, "train", progress=False)
    return counts.train, len(images), data_fingerprint({"name": "cifar10", "format": "imagefolder", "root": root})


def _hidden_file(cat):
    (cat / ".DS_Store").write_bytes(b"\x00")
    (cat / "._0.png").write_bytes(b"AppleDouble")  # a macOS resource fork with an image name


def _hidden_folder(cat):
    for folder in (cat.parent / ".ipynb_checkpoints", cat.parent / "__MACOSX", cat / ".thumbnails"):
        folder.mkdir()
        _png(folder / "1.png")


def _not_an_image(cat):
    (cat / "notes.txt").write_text("taken by hand")


def _sub_folder(cat):
    (cat / "more").mkdir()
    _png(cat / "more" / "1.png")


def _broken_link(cat):
    os.symlink(cat / "gone.png", cat / "link.png")


@pytest.mark.parametrize("change", [_hidden_file, _hidden_folder, _not_an_image, _sub_folder, _broken_link])
def test_entries_that_are_not_images_change_no_reader(tmp_path, change):
    root = _tree(tmp_path)
    before = readers(root)
    change(root / "train" / "cat")
    assert readers(root) == before
    assert before[:2] == (10, 10)


def _upper_case(cat):
    _png(cat / "1.PNG", seed=7)


def _link_to_image(cat):
    _png(cat.parent.parent / "elsewhere.png", seed=8)
    os.symlink(cat.parent.parent / "elsewhere.png", cat / "1.png")


@pytest.mark.parametrize("change", [_upper_case, _link_to_image])
def test_an_image_counts_for_every_reader(tmp_path, change):
    root = _tree(tmp_path)
    count, loaded, fingerprint = readers(root)
    change(root / "train" / "cat")
    again = readers(root)
    assert again[:2] == (count + 1, loaded + 1) and again[2] != fingerprint


def test_the_listing_says_what_it_skipped_and_in_which_order(tmp_path):
    root = _tree(tmp_path)
    cat = root / "train" / "cat"
    _png(cat / "b.JPG")  # an image, although no decoder would call it one by its case
    _png(cat / "a.png")
    _not_an_image(cat)
    _hidden_file(cat)
    listing = scan(root, "train")
    assert listing.classes == CLASSES
    cats = [os.path.basename(p) for p, label in listing.files if CLASSES[label] == "cat"]
    assert cats == ["0.png", "a.png", "b.JPG"]  # by name
    assert listing.ignored == (str(cat / "notes.txt"),)  # hidden files are not even ignored: not seen


def test_a_broken_tree_is_refused_by_the_check_as_by_the_loader(tmp_path):
    root = _tree(tmp_path)
    for p in (root / "test" / "horse").iterdir():
        p.unlink()
    with pytest.raises(DataError, match="class folder.* hold no image") as from_check:
        image_counts({"name": "cifar10", "format": "imagefolder", "root": str(root)})
    with pytest.raises(DataError) as from_loader:
        load_imagefolder(root, "test", progress=False)
    assert str(from_check.value) == str(from_loader.value)
    assert data_fingerprint({"name": "cifar10", "format": "imagefolder", "root": root})  # still a digest
    (root / "test" / "horse").rmdir()
    with pytest.raises(DataError, match="missing: horse; unexpected: none"):
        list_images(root, "test")


def test_the_fingerprint_digests_class_name_and_size_of_each_image(tmp_path):
    """The digest's text, written out: a change to it would move every run folder trained on ImageFolder data."""
    root = _tree(tmp_path)
    text = ""
    for split in ("train", "test"):
        text += f"[{split}]"
        for name in CLASSES:
            text += f"{name}/0.png:{(root / split / name / '0.png').stat().st_size};"
    expected = hashlib.sha256(text.encode()).hexdigest()[:12]
    assert data_fingerprint({"name": "cifar10", "format": "imagefolder", "root": str(root)}) == expected


def test_the_committed_cifar10_copy_keeps_its_fingerprint():
    root = require_cifar()
    assert data_fingerprint({"name": "cifar10", "format": "imagefolder", "root": str(root)}) == CIFAR10_FINGERPRINT
