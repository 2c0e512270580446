"""The ImageFolder reader under faults: damaged caches, stray files, bad images, bad layouts.

Every test builds a tiny CIFAR-style tree (10 classes x 2 images, written with
PIL) in tmp_path, so the file runs in seconds.
"""

import os
import re
import time
import warnings

import numpy as np
import pytest
import torch
from PIL import Image

from vitpos.data import tensor_cache
from vitpos.data.cifar10 import CLASSES, DataError, DatasetNotFoundError, load_imagefolder, load_official

CACHE = ".vitpos-train-uint8.pt"


def _write_image(path, size=32, seed=0, fmt="JPEG"):
    pixels = np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path, fmt)


def _tree(root, per_class=2):
    for label, name in enumerate(CLASSES):
        d = root / "train" / name
        d.mkdir(parents=True)
        for i in range(per_class):
            _write_image(d / f"{i:04d}.jpg", seed=label * 100 + i)
    return root


def _load_quietly(root, **kw):
    """Load and fail on any warning of ours: a healthy cache or tree must not warn."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        warnings.simplefilter("error", UserWarning)
        return load_imagefolder(root, "train", progress=False, **kw)


@pytest.fixture
def cached(tmp_path):
    """A tree whose cache is written, with the decoded tensors for comparison."""
    root = _tree(tmp_path)
    images, labels = _load_quietly(root)
    return root, root / CACHE, images, labels


# ---------------------------------------------------------------- the cache


def test_cache_is_moved_into_place_with_its_checksum(cached):
    root, cache, images, labels = cached
    assert [p.name for p in root.iterdir() if p.is_file()] == [CACHE]  # no temporary file left behind
    saved = torch.load(cache, weights_only=True)
    assert saved["format"] == tensor_cache.FORMAT
    assert saved["sha256"] == tensor_cache.checksum({"images": images, "labels": labels})
    again, again_labels = _load_quietly(root)  # the cached load verifies and does not warn
    assert torch.equal(again, images) and torch.equal(again_labels, labels)
    assert labels.tolist() == [c for c in range(10) for _ in range(2)]


def _truncate(cache):
    cache.write_bytes(cache.read_bytes()[: cache.stat().st_size // 2])


def _partial(cache):
    """A writer killed mid-write: its temporary file left over, and (old in-place writer) a cut final file."""
    tmp = cache.with_name(f"{CACHE}.dead1234.tmp")
    tmp.write_bytes(cache.read_bytes()[:1000])
    old = time.time() - tensor_cache.STALE_TMP_S - 60
    os.utime(tmp, (old, old))
    _truncate(cache)


def _flip_byte(cache):
    data = bytearray(cache.read_bytes())
    data[len(data) // 2] ^= 0xFF  # the middle of the file lies in the image bytes
    cache.write_bytes(bytes(data))


def _swap_pixels(cache):
    """A valid torch file whose tensors no longer match the stored checksum."""
    saved = torch.load(cache, weights_only=True)
    saved["tensors"]["images"][0, 0, 0, 0] ^= 1
    torch.save(saved, cache)


@pytest.mark.parametrize("damage", [_truncate, _partial, _flip_byte, _swap_pixels])
def test_a_damaged_cache_is_detected_and_rebuilt(cached, damage):
    root, cache, images, labels = cached
    damage(cache)
    with pytest.warns(RuntimeWarning, match=re.escape(str(cache)) + ".*rebuilding"):
        rebuilt, rebuilt_labels = load_imagefolder(root, "train", progress=False)
    assert torch.equal(rebuilt, images) and torch.equal(rebuilt_labels, labels)
    assert [p.name for p in root.iterdir() if p.is_file()] == [CACHE]  # the stale temporary file is gone
    _load_quietly(root)  # the rebuilt cache verifies


def test_a_fresh_temporary_file_may_be_another_writer_and_is_kept(cached):
    root, cache, _, _ = cached
    other = cache.with_name(f"{CACHE}.live5678.tmp")
    other.write_bytes(b"being written")
    cache.unlink()
    _load_quietly(root)
    assert other.exists() and cache.exists()


def test_an_older_cache_format_is_rebuilt_without_a_warning(cached):
    root, cache, images, labels = cached
    torch.save({"fingerprint": "from format 1", "images": images[:1], "labels": labels[:1]}, cache)
    assert _load_quietly(root)[0].shape[0] == 20
    assert torch.load(cache, weights_only=True)["format"] == tensor_cache.FORMAT


def test_a_cache_that_cannot_be_written_only_warns(tmp_path):
    root = _tree(tmp_path / "data")
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the cache folder should be")
    with pytest.warns(RuntimeWarning, match="could not write the decoded-data cache"):
        images, _ = load_imagefolder(root, "train", cache_dir=blocker, progress=False)
    assert images.shape == (20, 3, 32, 32)


# ---------------------------------------------------------------- the tree


def test_hidden_and_non_image_files_are_skipped(tmp_path):
    root = _tree(tmp_path)
    (root / "train" / "cat" / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    (root / "train" / "cat" / "._0000.jpg").write_bytes(b"AppleDouble")  # macOS resource fork, not a JPEG
    (root / "train" / ".DS_Store").write_bytes(b"\x00")
    (root / "train" / ".ipynb_checkpoints").mkdir()
    (root / "train" / "dog" / "notes.txt").write_text("taken by hand")
    with pytest.warns(UserWarning, match=r"ignored 1 entry .*dog/notes\.txt") as record:
        images, labels = load_imagefolder(root, "train", progress=False)
    assert not any("DS_Store" in str(w.message) for w in record)  # hidden files: skipped silently
    assert images.shape == (20, 3, 32, 32) and labels.bincount().tolist() == [2] * 10


def test_png_and_upper_case_extensions_are_read(tmp_path):
    root = _tree(tmp_path)
    _write_image(root / "train" / "cat" / "extra.PNG", fmt="PNG", seed=7)
    images, labels = _load_quietly(root)
    assert images.shape[0] == 21 and labels.bincount()[CLASSES.index("cat")] == 3


def test_every_bad_image_is_collected_and_reported_with_its_path(tmp_path):
    root = _tree(tmp_path)
    good = (root / "train" / "cat" / "0000.jpg").read_bytes()
    (root / "train" / "cat" / "0001.jpg").write_bytes(good[: len(good) // 2])  # truncated JPEG
    _write_image(root / "train" / "dog" / "0001.jpg", size=64)  # another size
    (root / "train" / "frog" / "0000.jpg").write_text("not an image")
    for i in range(4):  # more than the error lists
        (root / "train" / "ship" / f"bad{i}.jpg").write_bytes(b"")
    with pytest.raises(DataError) as err:
        load_imagefolder(root, "train", progress=False)
    message = str(err.value)
    assert message.startswith(f"7 of 24 files in {root / 'train'} cannot be used")
    assert f"{root / 'train' / 'cat' / '0001.jpg'} cannot be decoded (Image is incomplete or truncated)" in message
    assert f"{root / 'train' / 'dog' / '0001.jpg'} is 64x64, not 32x32" in message
    assert str(root / "train" / "frog" / "0000.jpg") in message
    assert message.count(f"{root / 'train'}{os.sep}") == 5  # the first five paths, not all seven
    assert not (root / CACHE).exists()  # nothing cached from a broken tree


def test_an_empty_class_folder_is_refused_by_name(tmp_path):
    root = _tree(tmp_path)
    for p in (root / "train" / "horse").iterdir():
        p.unlink()
    (root / "train" / "horse" / ".DS_Store").write_bytes(b"\x00")  # hidden files do not count
    with pytest.raises(DataError, match=re.escape(str(root / "train" / "horse")) + ".*\n.*expected layout"):
        load_imagefolder(root, "train", progress=False)


def test_a_missing_class_folder_is_refused_by_name(tmp_path):
    root = _tree(tmp_path)
    for p in (root / "train" / "truck").iterdir():
        p.unlink()
    (root / "train" / "truck").rmdir()
    (root / "train" / "lorry").mkdir()
    with pytest.raises(DataError, match="missing: truck; unexpected: lorry"):
        load_imagefolder(root, "train", progress=False)


def test_a_missing_split_folder_names_it_and_the_layout(tmp_path):
    root = _tree(tmp_path)
    with pytest.raises(DataError, match=r"has no test/ folder \(expected layout: DIR/train/<class>"):
        load_imagefolder(root, "test", progress=False)


def test_data_root_naming_a_file_says_it_is_a_file(tmp_path):
    archive = tmp_path / "cifar10.tar"
    archive.write_bytes(b"\x00")
    with pytest.raises(DataError, match=r"data.root=.*cifar10.tar is a file, not a folder") as err:
        load_imagefolder(archive, "train", progress=False)
    assert "does not exist" not in str(err.value)
    assert isinstance(err.value, DatasetNotFoundError)  # train.py and viz print these without a traceback
    with pytest.raises(DataError, match=r"data.root=.*cifar10.tar is a file, not a folder"):
        load_official(archive, train=True, download=False)
