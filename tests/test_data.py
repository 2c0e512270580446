import pytest
import torch
from conftest import require_cifar
from torchvision.io import encode_jpeg

from vitpos.data import augment, tensor_cache
from vitpos.data.cifar10 import CLASSES, DatasetNotFoundError, load_imagefolder, load_official
from vitpos.data.images import ImageDataModule
from vitpos.data.shapes import make_shapes


def test_random_crop_takes_a_window_of_the_padded_image():
    images = torch.randint(0, 255, (16, 3, 8, 8), dtype=torch.uint8)
    out = augment.random_crop(images, 2, torch.Generator().manual_seed(0))
    padded = torch.nn.functional.pad(images, (2,) * 4)
    for i in range(16):
        windows = [padded[i, :, y : y + 8, x : x + 8] for y in range(5) for x in range(5)]
        assert any(torch.equal(out[i], w) for w in windows)
    assert not all(torch.equal(out[i], images[i]) for i in range(16))


def test_hflip_flips_some_and_keeps_others():
    images = torch.randn(64, 3, 4, 4)
    out = augment.random_hflip(images, 0.5, torch.Generator().manual_seed(0))
    flipped = [torch.equal(o, i.flip(-1)) for o, i in zip(out, images)]
    kept = [torch.equal(o, i) for o, i in zip(out, images)]
    assert all(f or k for f, k in zip(flipped, kept)) and 10 < sum(flipped) < 54


def test_shapes_label_is_where_the_red_square_is():
    images, labels = make_shapes(200, seed=3)
    assert set(labels.tolist()) == {0, 1, 2, 3}
    cells = images.reshape(200, 3, 8, 4, 8, 4).float().mean((3, 5))  # (N, 3, 8, 8) mean colour per cell
    red = (cells[:, 0] - cells[:, 2]).flatten(1).argmax(1)
    blue = (cells[:, 2] - cells[:, 0]).flatten(1).argmax(1)
    expected = 2 * (red // 8 < blue // 8).long() + (red % 8 < 4).long()  # red above blue; red in the left half
    assert torch.equal(expected, labels)
    again, _ = make_shapes(200, seed=3)
    assert torch.equal(again, images)  # seeded


def _make_shapes_reference(num, img_size=32, cell=4, seed=0):
    """make_shapes as it was before it could draw other sizes: its training images must not change."""
    g = torch.Generator().manual_seed(seed)
    cells = img_size // cell
    images = torch.randint(0, 110, (num, 3, img_size, img_size), generator=g, dtype=torch.uint8)
    r1, c1 = torch.randint(0, cells, (num,), generator=g), torch.randint(0, cells, (num,), generator=g)
    r2 = (r1 + torch.randint(1, cells, (num,), generator=g)) % cells
    c2 = (c1 + torch.randint(1, cells, (num,), generator=g)) % cells
    labels = 2 * (r1 < r2).long() + (c1 < cells // 2).long()
    red = torch.tensor([230, 30, 30], dtype=torch.int16)
    blue = torch.tensor([30, 30, 230], dtype=torch.int16)
    jitter = torch.randint(-25, 26, (num, 2, 3), generator=g, dtype=torch.int16)
    for i in range(num):
        for (r, c), color, j in (((r1[i], c1[i]), red, jitter[i, 0]), ((r2[i], c2[i]), blue, jitter[i, 1])):
            ys, xs = slice(r * cell, (r + 1) * cell), slice(c * cell, (c + 1) * cell)
            images[i, :, ys, xs] = (color + j).clamp(0, 255).to(torch.uint8)[:, None, None]
    return images, labels


@pytest.mark.parametrize("img_size, cell, seed", [(32, 4, 3), (16, 4, 1), (24, 8, 0)])
def test_shapes_training_images_are_those_of_the_original_generator(img_size, cell, seed):
    images, labels = make_shapes(100, img_size, cell, seed=seed)
    reference = _make_shapes_reference(100, img_size, cell, seed=seed)
    assert torch.equal(images, reference[0]) and torch.equal(labels, reference[1])
    assert torch.equal(make_shapes(100, img_size, cell, seed=seed, size=img_size)[0], images)


@pytest.mark.parametrize("size", [8, 12, 16, 24, 32, 64])
def test_shapes_at_any_size_draw_the_same_layouts_natively(size):
    """Rendered at ``size`` px from the generator: the same labels, each square filling exactly its cell
    (size / 4 px a side, sharp edges: the noise never reaches 150 in red or blue)."""
    base, labels = make_shapes(60, img_size=16, cell=4, seed=5)  # 4x4 cells
    images, at_size = make_shapes(60, img_size=16, cell=4, seed=5, size=size)
    assert images.shape == (60, 3, size, size) and torch.equal(at_size, labels)
    step = size // 4

    def cells_at_size(cells):  # (N, 4, 4) -> (N, S, S): each cell becomes step x step pixels
        return cells.repeat_interleave(step, -2).repeat_interleave(step, -1)

    for channel in (0, 2):  # the red square, the blue square
        square = base[:, channel, ::4, ::4] > 150  # (N, 4, 4): the cell it fills at 16 px
        assert torch.equal(square.flatten(1).sum(1), torch.ones(60, dtype=torch.long))
        assert torch.equal(images[:, channel] > 150, cells_at_size(square))  # exactly its cell at S px
        colour = base[:, :, ::4, ::4].permute(0, 2, 3, 1)[square]  # (N, 3) the square's colour at 16 px
        painted = images.permute(0, 2, 3, 1)[cells_at_size(square)].reshape(60, step * step, 3)
        assert torch.equal(painted, colour[:, None].expand_as(painted))  # in every pixel of the cell


def test_shapes_refuse_sizes_that_split_a_cell():
    with pytest.raises(ValueError, match="^eval.resolutions: .*multiple of 4"):
        make_shapes(4, img_size=16, cell=4, size=18)


def _write_folder(root, per_class=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    for split in ("train", "test"):
        for name in CLASSES:
            d = root / split / name
            d.mkdir(parents=True, exist_ok=True)
            for i in range(per_class):
                img = torch.randint(0, 255, (3, 32, 32), dtype=torch.uint8, generator=g)
                (d / f"{i:04d}.jpg").write_bytes(encode_jpeg(img).numpy().tobytes())


def test_imagefolder_decodes_once_caches_and_rebuilds_when_files_change(tmp_path):
    _write_folder(tmp_path)
    images, labels = load_imagefolder(tmp_path, "train", progress=False)
    assert images.shape == (20, 3, 32, 32) and images.dtype == torch.uint8
    assert labels.tolist() == [c for c in range(10) for _ in range(2)]
    cache = tmp_path / ".vitpos-train-uint8.pt"
    assert cache.exists()
    tensor_cache.save(cache, "stale", {"images": images[:1], "labels": labels[:1]})  # valid, for other files
    assert load_imagefolder(tmp_path, "train", progress=False)[0].shape[0] == 20  # stale cache rebuilt
    (tmp_path / "train" / "cat" / "0000.jpg").unlink()
    assert load_imagefolder(tmp_path, "train", progress=False)[0].shape[0] == 19


def test_missing_data_gives_one_clear_error(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="data=shapes"):
        load_imagefolder(tmp_path / "nowhere", "train")
    with pytest.raises(DatasetNotFoundError, match="data.format=imagefolder"):
        load_official(tmp_path, train=True, download=False)
    (tmp_path / "train" / "cat").mkdir(parents=True)
    with pytest.raises(DatasetNotFoundError, match="one folder per CIFAR-10 class"):
        load_imagefolder(tmp_path, "train")


def test_datamodule_split_is_seeded_and_disjoint(tmp_path):
    _write_folder(tmp_path, per_class=5)
    dm = ImageDataModule(format="imagefolder", root=str(tmp_path), val_size=10, batch_size=8)
    dm.setup()
    assert len(dm.train[0]) == 40 and len(dm.val[0]) == 10 and len(dm.test[0]) == 50
    dm2 = ImageDataModule(format="imagefolder", root=str(tmp_path), val_size=10)
    dm2.setup()
    assert torch.equal(dm.val[0], dm2.val[0])
    train_rows = {tuple(x.flatten()[:64].tolist()) for x in dm.train[0]}
    assert not any(tuple(x.flatten()[:64].tolist()) in train_rows for x in dm.val[0])
    images, labels = next(iter(dm.train_dataloader()))
    assert images.shape == (8, 3, 32, 32) and images.dtype == torch.uint8
    x, y = dm.prepare_batch((images, labels), train=True)
    assert x.dtype == torch.float32 and x.shape == (8, 3, 32, 32)
    big = next(iter(dm.test_dataloader_at(48)))[0]
    assert big.shape[-2:] == (48, 48) and big.dtype == torch.uint8


def test_real_cifar10_copy_loads_with_the_official_layout():
    root = require_cifar()
    images, labels = load_imagefolder(root, "test")
    assert images.shape == (10000, 3, 32, 32)
    assert torch.equal(labels.bincount(), torch.full((10,), 1000))


def test_the_data_module_takes_its_defaults_from_the_schema(monkeypatch):
    """vitpos/config/data.py is the one place an image data option's default is written: the composed
    config holds exactly the schema's keys and values, the module fills in what it is not given from the
    schema (change the default, the module follows), and a key no image data set has is refused, naming it
    and the valid keys."""
    import dataclasses

    from conftest import compose_train
    from omegaconf import OmegaConf

    from vitpos import config
    from vitpos.errors import UserError

    for name in ("cifar10", "shapes"):
        composed = OmegaConf.to_container(compose_train(f"data={name}").data)
        assert composed == config.defaults(config.SCHEMAS[("data", name)]), name
        made = dict(ImageDataModule(name=name).hparams)
        assert all(made[k] == v for k, v in composed.items() if k != "num_classes"), name
    changed = dataclasses.make_dataclass(
        "Changed", [("val_size", int, 123)], bases=(config.SCHEMAS[("data", "shapes")],)
    )
    monkeypatch.setitem(config.SCHEMAS, ("data", "shapes"), changed)
    assert ImageDataModule(name="shapes").hparams.val_size == 123
    assert ImageDataModule(name="shapes", val_size=7).hparams.val_size == 7
    with pytest.raises(UserError, match=r"data\.val_sise: not an option of the image data sets \(valid: .*val_size"):
        ImageDataModule(name="shapes", val_sise=10)
