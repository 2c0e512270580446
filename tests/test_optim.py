import pytest
from conftest import small_vit

from vitpos.tasks.optim import parameter_groups, warmup_cosine


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


def test_warmup_then_cosine():
    f = warmup_cosine(total_steps=110, warmup_steps=10, min_lr_ratio=0.01)
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0)
    assert f(10) == pytest.approx(1.0) and f(60) == pytest.approx(0.505)
    assert f(110) == pytest.approx(0.01)
    assert all(f(s) >= f(s + 1) for s in range(10, 110))
