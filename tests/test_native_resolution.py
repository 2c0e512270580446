"""Train small, test at native resolution; multi-resolution training (the data side).

CIFAR-10 stays in memory at its native 32 px; a model trained at ``data.img_size=16`` is scored at 32 px
on the original test pixels, bit for bit, and every other size says how it was made
(``ImageDataModule.resampling``). ``data.train_sizes`` draws one size per training batch from
(seed, epoch, batch index), or with ``data.size_schedule=progressive`` from the epoch alone."""

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from conftest import ROOT, EvalModule, require_cifar, small_vit
from lightning.fabric.utilities.data import _set_sampler_epoch
from test_data import _write_folder
from torchvision.io import ImageReadMode, decode_image, read_file

from vitpos.data import augment
from vitpos.data.cifar10 import CLASSES, MEAN, STD
from vitpos.data.images import ImageDataModule
from vitpos.data.schedule import progressive_size
from vitpos.encodings import list_encodings
from vitpos.extrapolate import evaluate_sizes
from vitpos.run.sweep import image_encodings


class Recorder(EvalModule):
    """Keeps every batch the model is fed (after the datamodule's ``prepare_batch``)."""

    def __init__(self, model):
        super().__init__(model)
        self.seen: list[torch.Tensor] = []

    def evaluate_batch(self, batch):
        self.seen.append(batch[0].clone())
        return super().evaluate_batch(batch)


def jpeg_paths(root) -> list[str]:
    """Every test JPEG in the loader's order (classes in CIFAR-10 order, files sorted by name)."""
    return [
        os.path.join(root, "test", name, f)
        for name in CLASSES
        for f in sorted(os.listdir(os.path.join(root, "test", name)))
        if not f.startswith(".")
    ]


def test_native_evaluation_feeds_the_original_test_pixels_bit_for_bit():
    root = require_cifar()
    dm = ImageDataModule(name="cifar10", format="imagefolder", root=str(root), img_size=16, eval_batch_size=256)
    dm.setup()
    assert dm.native_size == 32 and dm.train[0].shape[-1] == dm.val[0].shape[-1] == dm.test[0].shape[-1] == 16
    assert [dm.resampling(s) for s in (16, 24, 32, 48, 64)] == [
        "downsampled", "downsampled", "native", "upsampled", "upsampled"]  # fmt: skip
    dm.limit_extrapolation(200)  # 200 seeded images from every class (one batch)
    module = Recorder(small_vit("sincos_2d", img_size=16, patch_size=2))  # built for 16 px: an 8x8 grid
    evaluate_sizes(module, dm, [32, 16], ["extrapolate"], "res", progress=False)
    at32, at16 = module.seen
    paths = jpeg_paths(root)
    picked = dm._extrapolation_keep
    assert picked is not None and len(set(dm.test[1][picked].tolist())) == 10
    # decoded straight from the files by torchvision.io, not through vitpos's loader or its cache
    original = torch.stack([decode_image(read_file(paths[i]), mode=ImageReadMode.RGB) for i in picked.tolist()])
    assert torch.equal(at32, augment.normalize(original, MEAN, STD))  # the JPEG's own pixels, no resampling
    assert torch.equal(at16, augment.normalize(augment.resize_images(original, 16), MEAN, STD))
    assert at32.shape[-1] == 32 and at16.shape[-1] == 16
    # the training resolution: the extrapolation images at 16 px are those test/acc scores
    assert torch.equal(next(iter(dm.test_dataloader_at(16)))[0], dm.test[0][picked])


def test_training_below_native_resizes_once_and_keeps_the_native_test_set(tmp_path):
    _write_folder(tmp_path, per_class=3)
    dm = ImageDataModule(format="imagefolder", root=str(tmp_path), img_size=16, val_size=6, eval_batch_size=100)
    dm.setup()
    assert dm.train[0].shape[1:] == dm.val[0].shape[1:] == dm.test[0].shape[1:] == (3, 16, 16)
    assert dm.test_native[0].shape[1:] == (3, 32, 32)
    assert dm.crop_padding == 2  # data.crop_padding=4 native pixels, at 16 px
    assert dm.train_sizes == (16,)
    native = next(iter(dm.test_dataloader_at(32)))[0]
    assert torch.equal(native, dm.test_native[0])
    assert torch.equal(next(iter(dm.test_dataloader_at(16)))[0], dm.test[0])
    assert next(iter(dm.test_dataloader_at(48)))[0].shape[-1] == 48 and dm.resampling(48) == "upsampled"
    images, labels = next(iter(dm.train_dataloader()))
    assert dm.prepare_batch((images, labels), train=True)[0].shape[-1] == 16
    with pytest.raises(ValueError, match="data.native_size=32"):
        ImageDataModule(format="imagefolder", root=str(tmp_path), native_size=64, val_size=6).setup()


def test_shapes_are_native_at_every_size():
    dm = ImageDataModule(name="shapes", img_size=16, num_train=64, val_size=16, num_test=40, test_subset=30)
    dm.setup()
    assert dm.native_size is None and {dm.resampling(s) for s in (8, 16, 24, 64)} == {"native"}
    dm.limit_extrapolation(20)
    labels = next(iter(dm.test_dataloader_at(16)))[1]
    for size in (8, 24, 32, 64):
        images, at_size = next(iter(dm.test_dataloader_at(size)))
        assert images.shape[-1] == size and torch.equal(at_size, labels)
    with pytest.raises(ValueError, match="eval.resolutions"):
        dm.test_dataloader_at(18)  # 4 cells a side: 18 px is not a whole number of pixels a cell


def sizes_of_epoch(dm: ImageDataModule, epoch: int) -> tuple[list[int], list[torch.Tensor]]:
    loader = dm.train_dataloader()
    _set_sampler_epoch(loader, epoch)  # what Lightning calls before every epoch
    sizes, labels = [], []
    for batch in loader:
        images, y = dm.prepare_batch(batch, train=True)
        assert images.shape[-2:] == (batch[2], batch[2])
        sizes.append(batch[2])
        labels.append(y)
    return sizes, labels


def test_multi_resolution_batches_take_every_size_seeded_by_seed_and_epoch(tmp_path):
    _write_folder(tmp_path, per_class=8)
    opts = dict(format="imagefolder", root=str(tmp_path), img_size=16, val_size=8, batch_size=4)
    dm = ImageDataModule(**opts, train_sizes=[16, 24, 32], shuffle_seed=3)
    dm.setup()
    assert dm.train_sizes == (16, 24, 32) and dm.train[0].shape[-1] == 32  # cropped at native, then resized
    assert dm.crop_padding == 4 and dm.val[0].shape[-1] == dm.test[0].shape[-1] == 16
    first, labels = sizes_of_epoch(dm, 0)
    assert set(first) == {16, 24, 32} and len(first) == 18
    again = ImageDataModule(**opts, train_sizes=[16, 24, 32], shuffle_seed=3)
    again.setup()
    assert sizes_of_epoch(again, 0)[0] == first  # the same (seed, epoch): the same sizes (exact resume)
    assert sizes_of_epoch(dm, 1)[0] != first and sizes_of_epoch(dm, 0)[0] == first
    other_seed = ImageDataModule(**opts, train_sizes=[16, 24, 32], shuffle_seed=4)
    other_seed.setup()
    assert sizes_of_epoch(other_seed, 0)[0] != first
    fixed = ImageDataModule(**opts, shuffle_seed=3)  # the batch order does not depend on data.train_sizes
    fixed.setup()
    loader = fixed.train_dataloader()
    assert all(torch.equal(y, batch[1]) for y, batch in zip(labels, loader, strict=True))


@pytest.mark.slow
def test_every_image_encoding_trains_across_sizes_from_the_command_line_and_extrapolates(tmp_path):
    """Every image encoding trains with data.train_sizes=[16,24,32] from the command line (one
    sweep, one process: shapes, the native model config cut to one block, 4 batches of 16, compile off:
    three graphs per encoding cost minutes on a CPU, and compiling per size is tests/test_compile.py's),
    is scored at each size, and extrapolates from its checkpoint with python -m vitpos.extrapolate."""
    encodings = image_encodings()  # the image encodings every full comparison sweeps
    assert set(encodings) <= set(list_encodings(2)) and {"lookhere", "alibi_2d"} <= set(encodings)
    args = [
        "-m", "data=shapes", "model=vit_cpu_p2", "model.depth=1", "data.img_size=16", "data.train_sizes=[16,24,32]",
        "trainer.max_epochs=1", "+trainer.limit_train_batches=4", "+trainer.limit_val_batches=1", "data.num_test=64",
        "data.num_train=576", "data.val_size=64", "data.batch_size=16", "data.eval_batch_size=64",
        "eval.resolutions=[16,24,32]", "task.pictures=false", f"encoding={','.join(encodings)}",
        f"run.root={tmp_path / 'runs'}", "model.compile=false", "trainer.enable_progress_bar=false",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *args], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count("test/acc ") + proc.stderr.count("] end after ") >= len(encodings)
    extrapolate = [sys.executable, "-m", "vitpos.extrapolate", f"ckpt={tmp_path / 'runs'}", "resolutions=[16,32]",
                   "data.num_test=64", f"out={tmp_path / 'extrapolation'}"]  # fmt: skip
    proc = subprocess.run(extrapolate, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = (tmp_path / "extrapolation" / "extrapolation.csv").read_text()
    for name in encodings:
        assert f"{name}-" in rows, f"{name} has no extrapolation row:\n{rows}"


def test_progressive_schedule_splits_the_epochs_over_the_sizes_low_first():
    """FixRes-style progressive resizing: equal runs of epochs in the listed order, the later runs
    one epoch longer when the epochs do not divide, the last size after the end."""
    by_epoch = {epochs: [progressive_size((16, 24, 32), e, epochs) for e in range(epochs)] for epochs in (1, 3, 9, 10)}
    assert by_epoch[9] == [16] * 3 + [24] * 3 + [32] * 3
    assert by_epoch[10] == [16] * 3 + [24] * 3 + [32] * 4
    assert by_epoch[3] == [16, 24, 32] and by_epoch[1] == [32]  # one epoch: the final size only
    assert progressive_size((16, 24, 32), 12, 9) == 32
    assert [progressive_size((32, 16), e, 4) for e in range(4)] == [32, 32, 16, 16]  # the listed order, as given


def test_progressive_schedule_with_size_epochs_gives_each_size_its_epochs_and_scales_them():
    """``data.size_epochs``: the epochs of each size at their sum, in proportion at another
    ``max_epochs`` (the later sizes take the rounding), equal weights the same as no split."""

    def epochs_at(split, epochs):
        return [progressive_size((16, 24, 32), e, epochs, split) for e in range(epochs)]

    assert epochs_at((7, 3, 2), 12) == [16] * 7 + [24] * 3 + [32] * 2
    assert epochs_at((7, 3, 2), 24) == [16] * 14 + [24] * 6 + [32] * 4
    assert epochs_at((7, 3, 2), 6) == [16] * 3 + [24] * 2 + [32]  # 3.5 / 1.5 / 1: the later sizes round up
    assert epochs_at((7, 3, 2), 1) == [32]  # a one-epoch smoke run trains at the test size
    assert all(epochs_at((1, 1, 1), n) == epochs_at(None, n) for n in range(1, 14))
    assert progressive_size((16, 24, 32), 20, 12, (7, 3, 2)) == 32  # past the end: the last size
    with pytest.raises(ValueError, match="one count per size"):
        progressive_size((16, 24, 32), 0, 12, (7, 5))


def test_progressive_batches_take_their_epochs_size(tmp_path):
    _write_folder(tmp_path, per_class=8)
    opts = dict(format="imagefolder", root=str(tmp_path), img_size=32, val_size=8, batch_size=4)
    dm = ImageDataModule(**opts, train_sizes=[16, 24, 32], size_schedule="progressive", shuffle_seed=3)
    dm.trainer = SimpleNamespace(max_epochs=6, global_rank=0, world_size=1)
    dm.setup()
    assert [set(sizes_of_epoch(dm, e)[0]) for e in range(6)] == [{16}, {16}, {24}, {24}, {32}, {32}]
    dm.trainer = SimpleNamespace(max_epochs=None, global_rank=0, world_size=1)
    with pytest.raises(ValueError, match="trainer.max_epochs"):
        dm.train_dataloader()
    with pytest.raises(ValueError, match="valid: random, progressive"):
        ImageDataModule(**opts, train_sizes=[16, 32], size_schedule="fixres")
    split = ImageDataModule(**opts, train_sizes=[16, 32], size_schedule="progressive", size_epochs=[2, 1])
    split.trainer = SimpleNamespace(max_epochs=3, global_rank=0, world_size=1)
    split.setup()
    assert [set(sizes_of_epoch(split, e)[0]) for e in range(3)] == [{16}, {16}, {32}]
    with pytest.raises(ValueError, match="data.size_epochs"):
        ImageDataModule(**opts, train_sizes=[16, 32], size_schedule="random", size_epochs=[2, 1])
