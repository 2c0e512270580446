import math
from types import SimpleNamespace

import pytest
import torch
from conftest import small_vit
from timm.scheduler import CosineLRScheduler

from vitpos.config import defaults
from vitpos.config.optim import AdamW
from vitpos.tasks.optim import configure_optimizers, parameter_groups, warmup_cosine


@pytest.mark.parametrize("pool", ["gap", "cls"])
def test_no_weight_decay_on_norms_biases_position_tables_and_class_token(pool):
    model = small_vit({"name": "combo", "parts": ["rope_2d_mixed", "learned_1d"]}, pool=pool)
    decay, no_decay = parameter_groups(model, 0.05)
    assert decay["weight_decay"] == 0.05 and no_decay["weight_decay"] == 0.0
    names = {id(p): n for n, p in model.named_parameters()}
    skipped = {names[id(p)] for p in no_decay["params"]}
    decayed = {names[id(p)] for p in decay["params"]}
    assert {"pos.parts.0.freqs", "pos.parts.1.table", "norm.weight", "head.bias"} <= skipped
    assert ("cls_token" in skipped) == (pool == "cls")
    assert {"patch_embed.weight", "head.weight", "encoder.blocks.0.attn.qkv.weight"} <= decayed
    assert not decayed & skipped and len(decayed) + len(skipped) == len(names)


@pytest.mark.parametrize("weight_decay", [0.05, 0.0])
def test_groups_keep_their_order_and_contents_for_every_weight_decay(weight_decay):
    """timm's param_groups_weight_decay lists the no-decay group first, and returns one group
    when weight_decay is 0; parameter_groups keeps [decay, no decay] in the order of
    named_parameters, as before timm split them, so an earlier checkpoint's optimizer state and
    the LR monitor's train/lr/pg1, pg2 still match."""
    model = small_vit({"name": "combo", "parts": ["rope_2d_mixed", "learned_1d"]}, pool="cls")
    skip = model.no_weight_decay()
    params = list(model.named_parameters())
    expected_no_decay = [p for n, p in params if p.ndim <= 1 or n in skip]  # the rule before timm
    expected_decay = [p for n, p in params if not (p.ndim <= 1 or n in skip)]
    decay, no_decay = parameter_groups(model, weight_decay)
    assert decay["weight_decay"] == weight_decay and no_decay["weight_decay"] == 0.0
    assert [id(p) for p in decay["params"]] == [id(p) for p in expected_decay]
    assert [id(p) for p in no_decay["params"]] == [id(p) for p in expected_no_decay]


def test_warmup_then_cosine():
    f = warmup_cosine(total_steps=110, warmup_steps=10, min_lr_ratio=0.01)
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0)
    assert f(10) == pytest.approx(1.0) and f(60) == pytest.approx(0.505)
    assert f(110) == pytest.approx(0.01)
    assert all(f(s) >= f(s + 1) for s in range(10, 110))


def reference_lr(lr: float, total: int, warmup: int, min_ratio: float, step: int) -> float:
    """The schedule every committed run trained with, written out: warmup (step + 1) / warmup,
    then cosine from lr to min_ratio * lr over the remaining steps."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = min((step - warmup) / max(total - warmup, 1), 1.0)
    return lr * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


@pytest.mark.parametrize(
    ("total", "epochs", "warmup_epochs", "min_ratio"),
    [(50, 5, 1, 0.01), (37, 1, 0.1, 0.0), (120, 10, 2.5, 0.1), (8, 2, 0, 0.01), (3, 1, 1, 0.0)],
)
def test_configured_schedule_matches_the_reference_formula(total, epochs, warmup_epochs, min_ratio):
    """What configure_optimizers hands Lightning, stepped once per optimizer step (interval="step")."""
    model = small_vit()
    trainer = SimpleNamespace(estimated_stepping_batches=total, max_epochs=epochs, gradient_clip_val=None)
    optim = {**defaults(AdamW), "lr": 2e-3, "warmup_epochs": warmup_epochs, "min_lr_ratio": min_ratio}
    config = configure_optimizers(SimpleNamespace(trainer=trainer), model, optim)
    opt, sched = config["optimizer"], config["lr_scheduler"]["scheduler"]
    assert config["lr_scheduler"]["interval"] == "step" and len(opt.param_groups) == 2
    warmup = min(round(warmup_epochs * total / epochs), total - 1)
    for step in range(total + 2):
        want = reference_lr(2e-3, total, warmup, min_ratio, step)
        assert all(abs(group["lr"] - want) <= 1e-12 for group in opt.param_groups), step
        opt.step()
        sched.step()


def test_timm_cosine_scheduler_warms_up_one_step_later():
    """Why vitpos keeps warmup_cosine: timm's CosineLRScheduler, set to the same schedule,
    gives the same cosine but a warmup that reaches the full rate one step later, whatever
    warmup_lr_init is (0: step 0 is wasted; lr / warmup: a shallower line). Runs would not
    reproduce the committed numbers. If this test fails, timm can replace warmup_cosine."""
    lr, total, warmup, min_ratio = 1e-3, 40, 8, 0.01
    for warmup_lr_init in (0.0, lr / warmup):
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)
        timm_sched = CosineLRScheduler(
            opt,
            t_initial=total - warmup,
            lr_min=min_ratio * lr,
            warmup_t=warmup,
            warmup_lr_init=warmup_lr_init,
            warmup_prefix=True,
            t_in_epochs=False,
        )
        timm_lr = []
        for step in range(total + 2):
            timm_sched.step_update(step)
            timm_lr.append(opt.param_groups[0]["lr"])
        ours = [reference_lr(lr, total, warmup, min_ratio, step) for step in range(total + 2)]
        assert all(abs(a - b) <= 1e-12 for a, b in zip(timm_lr[warmup:], ours[warmup:]))  # the cosine: the same
        assert all(a < b - 1e-6 * lr for a, b in zip(timm_lr[1:warmup], ours[1:warmup]))  # the warmup: behind
        assert timm_lr[warmup - 1] < lr == ours[warmup - 1]
