"""The recipe's pieces: per-image augmentation policies on uint8
tensors and the EMA of the weights evaluated beside the raw weights."""

import pytest
import torch

from vitpos.data import augment
from vitpos.data.images import ImageDataModule
from vitpos.tasks.classification import ImageClassifier


def tiny_cfg(**task) -> dict:
    return {
        "data": {"img_size": 16, "num_classes": 4},
        "model": {"patch_size": 4, "dim": 32, "depth": 2, "num_heads": 2},
        "encoding": {"name": "learned_1d"},
        "optim": {"lr": 1e-3, "weight_decay": 0.05},
        "task": task,
    }


@pytest.mark.parametrize("policy", ["trivial", "randaugment"])
def test_policy_draws_per_image(policy):
    """One batch of 64 copies of one image: a per-image policy gives many distinct results
    (a per-batch call would give one), keeps uint8 and the shape, and replays from the seed."""
    torch.manual_seed(0)
    image = torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8)
    batch = image.expand(64, 3, 32, 32).contiguous()
    transform = augment.policy_transform(policy)
    torch.manual_seed(1)
    out = augment.per_image(batch, transform)
    assert out.dtype == torch.uint8 and out.shape == batch.shape
    distinct = {tuple(x.flatten()[:256].tolist()) for x in out}
    assert len(distinct) >= 16, f"{policy}: only {len(distinct)} distinct results of 64"
    torch.manual_seed(1)
    assert torch.equal(augment.per_image(batch, transform), out)


def test_policy_none_is_identity_and_unknown_lists_valid():
    batch = torch.randint(0, 256, (4, 3, 8, 8), dtype=torch.uint8)
    assert augment.per_image(batch, augment.policy_transform("none")) is batch
    with pytest.raises(ValueError, match="valid: none, trivial, randaugment"):
        augment.policy_transform("autoaugment")


def test_datamodule_applies_policy_only_in_training():
    dm = ImageDataModule(name="shapes", augment="trivial", crop_padding=0)
    images = torch.randint(0, 256, (32, 3, 32, 32), dtype=torch.uint8)
    labels = torch.zeros(32, dtype=torch.long)
    plain = dm.prepare_batch((images, labels), train=False)[0]
    torch.manual_seed(0)
    trained = dm.prepare_batch((images, labels), train=True)[0]
    assert not torch.equal(plain, trained)
    assert torch.equal(plain, dm.prepare_batch((images, labels), train=False)[0])


def test_ema_is_evaluated_and_raw_weights_kept():
    """With task.ema_decay, eval-mode forward and the extrapolated encoding use the
    averaged copy; training forward uses the raw model; the average is in the state dict."""
    torch.manual_seed(0)
    module = ImageClassifier(tiny_cfg(ema_decay=0.9))
    assert any(k.startswith("ema.") for k in module.state_dict())
    assert not any(p.requires_grad for p in module.ema.parameters())  # DDP waits for grads of trainable ones
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        for p in module.ema.module.parameters():
            p.add_(torch.randn_like(p))
    module.eval()
    assert module.encoding is module.ema.module.pos
    assert torch.allclose(module(x), module.ema.module(x))
    assert not torch.allclose(module(x), module.model(x))
    module.train()
    module.model.eval()  # no drop-path noise in the comparison
    assert torch.allclose(module(x), module.model(x))


def test_ema_update_moves_toward_raw_weights():
    torch.manual_seed(0)
    module = ImageClassifier(tiny_cfg(ema_decay=0.5, ema_warmup=False))
    with torch.no_grad():
        for p in module.model.parameters():
            p.add_(1.0)
    raw = torch.nn.utils.parameters_to_vector(module.model.parameters())
    before = torch.nn.utils.parameters_to_vector(module.ema.module.parameters())
    module.ema.update(module.model, step=10)
    after = torch.nn.utils.parameters_to_vector(module.ema.module.parameters())
    assert torch.allclose(after, 0.5 * before + 0.5 * raw, atol=1e-6)


def test_no_ema_by_default():
    module = ImageClassifier(tiny_cfg())
    assert module.ema is None and module.eval_model is module.model
    assert not any(k.startswith("ema.") for k in module.state_dict())


def test_extrapolation_subset_is_fixed_and_leaves_the_test_set_whole():
    dm = ImageDataModule(name="shapes", num_train=256, num_test=300, val_size=64, eval_batch_size=1000)
    dm.setup()
    full = next(iter(dm.test_dataloader_at(32)))[1]
    dm.limit_extrapolation(100)
    first = next(iter(dm.test_dataloader_at(24)))
    assert len(first[1]) == 100 and first[0].shape[-1] == 24
    dm.limit_extrapolation(100)
    again = next(iter(dm.test_dataloader_at(24)))
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert len(dm.test[1]) == 300 and len(next(iter(dm.test_dataloader()))[1]) == 300
    dm.limit_extrapolation(None)
    assert torch.equal(next(iter(dm.test_dataloader_at(32)))[1], full)


def test_flip_tta_scores_mean_softmax_of_image_and_mirror_beside_the_plain_score():
    """task.flip_tta: test/acc_flip is the accuracy of the averaged softmax of each image and its
    mirror; test/acc stays the plain score; off unless asked, and off when training does not flip."""
    torch.manual_seed(0)
    module = ImageClassifier(tiny_cfg(flip_tta=True)).eval()
    x, y = torch.randn(64, 3, 16, 16), torch.randint(0, 4, (64,))
    with torch.no_grad():
        module.test_step((x, y), 0)
        plain = module.model(x)
        averaged = plain.softmax(-1) + module.model(x.flip(-1)).softmax(-1)
    assert not torch.equal(averaged.argmax(-1), plain.argmax(-1))  # the mirror changes some answers here
    assert module.test_acc_flip.compute().item() == pytest.approx((averaged.argmax(-1) == y).float().mean().item())
    assert module.test_acc.compute().item() == pytest.approx((plain.argmax(-1) == y).float().mean().item())
    assert ImageClassifier(tiny_cfg()).test_acc_flip is None
    mirrored_labels = tiny_cfg(flip_tta=True)
    mirrored_labels["data"]["hflip"] = False  # e.g. data=shapes: a mirror is another class
    assert ImageClassifier(mirrored_labels).test_acc_flip is None
