"""The sequence side: toy data, SequenceTransformer, SequenceTask, text-image
cross-attention; slow tests train briefly and check what each encoding can learn."""

from __future__ import annotations

import pytest
import torch
from conftest import compose_train

from vitpos.data.sequence import IGNORE, SequenceDataModule, make_sequences
from vitpos.encodings import list_encodings
from vitpos.models.cross_attention import TextImageCrossAttention, grid_coords
from vitpos.models.seq_transformer import SequenceTransformer
from vitpos.tasks.sequence import SequenceTask

ONE_D = list_encodings(1)
PARTS_1D = {"parts": ["rope_1d", "learned_1d"]}  # combo's default parts are 2D


def encoding(name: str, **options) -> dict:
    return {"name": name, **(PARTS_1D if name == "combo" else {}), **options}


def small_model(name: str, **kw) -> SequenceTransformer:
    torch.manual_seed(0)
    opts = dict(vocab_size=17, num_classes=16, dim=32, depth=2, num_heads=4, max_len=24)
    return SequenceTransformer(encoding(name), **{**opts, **kw}).eval()


# ------------------------------------------------------------------------ model
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", ONE_D)
def test_outputs_do_not_depend_on_padding(name, causal):
    model = small_model(name, causal=causal)
    with torch.no_grad():  # randomize position parameters so they matter
        for p in model.pos.parameters():
            p.normal_()
    seq = torch.randint(0, 16, (1, 11))
    alone = model(seq)
    for pad in (3, 20):  # the padded batch is still no longer than max_len, then longer
        padded = torch.cat([seq, torch.full((1, pad), 16)], 1)
        other = torch.randint(0, 16, (1, 11 + pad))
        batch = torch.cat([padded, other])
        mask = torch.zeros(2, 11 + pad, dtype=torch.bool)
        mask[0, 11:] = True
        if pad + 11 > 24 and name in ("learned_1d", "combo"):
            continue  # a resampled table moves every position with the padded length (see the model docs)
        out = model(batch, mask)
        assert torch.allclose(out[0, :11], alone[0], atol=1e-5), f"{name}: padding changed the outputs"


@pytest.mark.parametrize("name", ["none", "rope_1d", "rope_1d_learned", "alibi", "rel_bias_1d"])
@pytest.mark.parametrize("causal", [False, True])
def test_rotary_and_bias_encodings_cannot_see_position_in_a_constant_sequence(name, causal):
    # They only reweight the values, and identical tokens have identical
    # values: every output is the same. Only encodings added to the tokens
    # can solve position_probe without an anchor token.
    model = small_model(name, causal=causal)
    out = model(torch.zeros(3, 20, dtype=torch.long))
    assert torch.allclose(out, out[:, :1].expand_as(out), atol=1e-5)


@pytest.mark.parametrize("name", ["learned_1d", "sincos_1d"])
def test_absolute_encodings_tell_positions_apart_in_a_constant_sequence(name):
    out = small_model(name, zero_token_embeddings=True)(torch.zeros(1, 20, dtype=torch.long))
    assert (out[0, 1:] - out[0, :1]).abs().amax(-1).min() > 1e-3


@pytest.mark.parametrize("name", ["none", "alibi"])
def test_bidirectional_alibi_cannot_tell_left_from_right(name):
    # -m|i - j| is symmetric, so reversing the input reverses the output: such
    # a model cannot learn copy_offset (i - k and i + k look alike).
    model = small_model(name)
    x = torch.randint(0, 16, (2, 19))
    assert torch.allclose(model(x.flip(1)), model(x).flip(1), atol=1e-5)


def test_learned_1d_refuses_longer_sequences_when_asked():
    model = small_model("learned_1d")
    model.pos.strategy = "error"
    with pytest.raises(ValueError, match="strategy"):
        model(torch.zeros(1, 30, dtype=torch.long))


# ------------------------------------------------------------------------- data
def test_targets_follow_each_task():
    tokens, targets, lengths = make_sequences("copy_offset", 50, 5, 20, offset=3, seed=1)
    for x, t, n in zip(tokens, targets, lengths):
        assert (t[:3] == IGNORE).all() and torch.equal(t[3:n], x[: n - 3]) and (t[n:] == IGNORE).all()
        assert (x[n:] == 16).all() and (x[:n] < 16).all()
    tokens, targets, lengths = make_sequences("reverse", 50, 5, 20, seed=1)
    for x, t, n in zip(tokens, targets, lengths):
        assert torch.equal(t[:n], x[:n].flip(0))
    tokens, targets, lengths = make_sequences("sort", 50, 5, 20, seed=1)
    for x, t, n in zip(tokens, targets, lengths):
        assert torch.equal(t[:n], x[:n].sort().values) and (t[n:] == IGNORE).all()
    tokens, targets, lengths = make_sequences("position_probe", 50, 5, 20, probe_classes=12, anchor=True, seed=1)
    for x, t, n in zip(tokens, targets, lengths):
        assert x[0] == 1 and (x[1:n] == 0).all()
        assert torch.equal(t[: min(n, 12)], torch.arange(min(n, 12))) and (t[12:] == IGNORE).all()


def test_datamodule_batches_are_seeded_and_padded():
    def first_batch(seed):
        dm = SequenceDataModule(num_train=64, num_val=16, num_test=16, train_len=20, min_len=4, batch_size=8, seed=seed)
        return dm, next(iter(dm.train_dataloader()))

    dm, batch = first_batch(0)
    assert set(batch) == {"tokens", "targets", "padding_mask"}
    lengths = (~batch["padding_mask"]).sum(1)
    assert batch["tokens"].shape[1] == lengths.max()  # trimmed to the longest example
    assert (batch["targets"][batch["padding_mask"]] == IGNORE).all()
    assert all(torch.equal(a, b) for a, b in zip(batch.values(), first_batch(0)[1].values()))
    assert not torch.equal(dm.splits["train"][0], first_batch(1)[0].splits["train"][0])
    long = list(dm.test_dataloader_at(50))
    assert all(b["tokens"].shape[1] == 50 and not b["padding_mask"].any() for b in long)
    assert sum(len(b["tokens"]) for b in long) == dm.num_length_test
    assert torch.equal(next(iter(dm.test_dataloader_at(50)))["tokens"], long[0]["tokens"])


# ------------------------------------------------------------------------- task
def task_cfg(enc: str | dict = "rope_1d", **data) -> dict:
    return {
        "model": {"dim": 32, "depth": 1, "num_heads": 4},
        "encoding": encoding(enc) if isinstance(enc, str) else dict(enc),
        "optim": {"lr": 1e-3, "weight_decay": 0.05, "warmup_epochs": 1, "min_lr_ratio": 0.01},
        "data": {"name": "seq_copy", "task": "copy_offset", "train_len": 16, "min_len": 6, **data},
    }


def test_evaluate_batch_counts_scored_tokens():
    module = SequenceTask(task_cfg()).eval()
    dm = SequenceDataModule(train_len=16, min_len=6, num_train=8, num_val=8, num_test=8)
    batch = next(iter(dm.test_dataloader()))
    loss, correct, count = module.evaluate_batch(batch)
    assert count == (batch["targets"] != IGNORE).sum()
    assert 0 <= correct <= count
    with torch.no_grad():
        _, _, mean = module.training_loss(batch)  # the mean over the same scored tokens
    assert torch.allclose(loss / count, mean, atol=1e-5)


def test_no_weight_decay_on_position_parameters():
    from vitpos.tasks.optim import parameter_groups

    for name, pos_param in (
        ("learned_1d", "pos.table"),
        ("rope_1d_learned", "pos.freqs"),
        ("rel_bias_1d", "pos.tables"),
    ):
        model = SequenceTask(task_cfg(name)).model
        decay, no_decay = parameter_groups(model, 0.05)
        target = dict(model.named_parameters())[pos_param]
        assert any(p is target for p in no_decay["params"]) and not any(p is target for p in decay["params"])
        assert all(p.ndim > 1 for p in decay["params"])


def test_lightning_fast_dev_run_and_checkpoint_roundtrip(tmp_path):
    import lightning as L

    module = SequenceTask(task_cfg("alibi", num_train=32, num_val=16, num_test=16, batch_size=8))
    dm = SequenceDataModule(**task_cfg(num_train=32, num_val=16, num_test=16, batch_size=8)["data"])
    trainer = L.Trainer(
        fast_dev_run=True, logger=False, enable_progress_bar=False, enable_model_summary=False, accelerator="cpu"
    )
    trainer.fit(module, datamodule=dm)
    trainer.save_checkpoint(tmp_path / "last.ckpt")
    again = SequenceTask.load_from_checkpoint(tmp_path / "last.ckpt").eval()
    batch = next(iter(dm.test_dataloader_at(40)))
    module.eval()
    assert torch.equal(again.evaluate_batch(batch)[1], module.evaluate_batch(batch)[1])
    assert again.encoding.name == "alibi"


def test_hydra_config_builds_the_sequence_task():
    from vitpos.tasks import build

    for enc in ("alibi", "rel_bias_1d", "rope_1d_learned", "rope_1d", "learned_1d", "sincos_1d", "none"):
        cfg = compose_train("task=sequence", f"encoding={enc}", "data=seq_probe", "data.num_train=8")
        module, dm = build(cfg)
        assert module.encoding.name == enc and dm.task == "position_probe"
        assert module.model.head.out_features == dm.num_classes == 512
        assert list(cfg.eval.lengths) == [32, 64, 128, 256, 512]


def test_train_runs_the_sequence_task_end_to_end(tmp_path):
    from vitpos.train import train

    overrides = [
        f"run.root={tmp_path}", "task=sequence", "encoding=alibi", "model.causal=true", "trainer.max_epochs=1",
        "trainer.enable_progress_bar=false", "data.num_train=128", "data.num_val=32", "data.num_test=32",
        "data.num_length_test=16", "data.train_len=24", "model.dim=32", "eval.lengths=[16,48]",
    ]  # fmt: skip
    metrics = train(compose_train(*overrides))
    assert {"test/acc", "test/acc@len16", "test/acc@len48", "val/acc_best"} <= set(metrics)
    assert 0.0 <= metrics["test/acc@len48"] <= 1.0
    (last,) = (tmp_path / "seq_copy").rglob("last.ckpt")  # seq_copy/seq_small/alibi-<hash>/seed0/checkpoints
    assert SequenceTask.load_from_checkpoint(last, map_location="cpu").model.causal


# -------------------------------------------------------------- cross-attention
def test_cross_attention_logits_depend_only_on_offsets():
    torch.manual_seed(0)
    attn = TextImageCrossAttention(dim=64, num_heads=2, context_dim=48)
    text, image, grid = torch.randn(2, 7, 64), torch.randn(2, 12, 48), (3, 4)
    patches, anchor = grid_coords(*grid), torch.tensor([1.0, 1.5])
    base = dict(text_pos=torch.arange(7.0), patch_pos=patches, image_text_pos=2.0, text_anchor=anchor)
    logits = attn.logits(text, image, grid, **base)
    for t, shift in ((5.0, (2.0, -3.0)), (-40.0, (11.0, 7.0))):
        shift = torch.tensor(shift)
        moved = dict(
            text_pos=base["text_pos"] + t, patch_pos=patches + shift, image_text_pos=2.0 + t, text_anchor=anchor + shift
        )
        assert torch.allclose(attn.logits(text, image, grid, **moved), logits, atol=1e-4)
    # and positions do matter: the text offset, and the 2D offset
    assert not torch.allclose(attn.logits(text, image, grid, **{**base, "image_text_pos": 5.0}), logits, atol=1e-2)
    assert not torch.allclose(attn.logits(text, image, grid, **{**base, "patch_pos": patches + 1}), logits, atol=1e-2)
    assert torch.allclose(
        attn.logits(text, image, grid), attn.logits(text, image, grid, **{**base, "image_text_pos": 0.0})
    )
    out = attn(text, image, grid, key_padding_mask=torch.zeros(2, 12, dtype=torch.bool))
    assert out.shape == text.shape and torch.allclose(out, attn(text, image, grid), atol=1e-6)


# ------------------------------------------------------------------------- slow
def train_briefly(data: dict, name: str | dict, steps: int = 300, lengths=(32, 64), lr: float = 3e-3, **model):
    """Seeded CPU training with the task's own model, optimizer groups and
    evaluator; returns accuracy per test length (sequences of exactly that length)."""
    from vitpos.tasks.optim import build_optimizer, warmup_cosine

    torch.manual_seed(0)
    data = {
        "train_len": 32,
        "min_len": 8,
        "num_train": 64 * steps,
        "num_val": 8,
        "num_test": 8,
        "num_length_test": 200,
        **data,
    }
    cfg = task_cfg(name, **data)
    cfg["model"] = {"dim": 64, "depth": 2, "num_heads": 4, **model}
    module = SequenceTask(cfg)
    dm = SequenceDataModule(**cfg["data"])
    opt = build_optimizer(module.model, lr, 0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(steps, steps // 10, 0.0))
    for batch in dm.train_dataloader():
        _, _, loss = module.training_loss(batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    module.eval()
    acc = {}
    for n in lengths:
        stats = [module.evaluate_batch(b) for b in dm.test_dataloader_at(n)]
        acc[n] = sum(int(s[1]) for s in stats) / sum(int(s[2]) for s in stats)
    return acc


@pytest.fixture(scope="module")
def threads():
    old = torch.get_num_threads()
    torch.set_num_threads(min(old, 2))
    yield
    torch.set_num_threads(old)


PROBE = {"name": "seq_probe", "task": "position_probe", "probe_classes": 64}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["learned_1d", "sincos_1d", "none"])
def test_position_probe_needs_an_absolute_encoding(name, threads):
    # all-identical tokens, bidirectional: chance is the best constant guess, 1/32 at length 32
    acc = train_briefly(PROBE, name, zero_token_embeddings=True, lengths=(32,))[32]
    if name == "none":
        assert acc <= 1 / 32 + 1e-6
    else:
        assert acc > 0.9


@pytest.mark.slow
@pytest.mark.parametrize(("name", "causal", "low", "high"), [
    ("rope_1d", False, 0.9, 1.0),   # a rotation relative to the anchor: exact
    ("alibi", False, 0.5, 1.0),     # distance to the anchor through a decaying weight: mostly
    ("none", False, 0.0, 2 / 32),   # nothing but the anchor itself (and one lucky guess)
    ("none", True, 0.5, 1.0),       # NoPE: a causal mask alone reveals position (Haviv et al. 2022)
])  # fmt: skip
def test_position_probe_with_an_anchor_token(name, causal, low, high, threads):
    acc = train_briefly({**PROBE, "anchor": True}, name, causal=causal, lengths=(32,))[32]
    assert low <= acc <= high


@pytest.mark.slow
@pytest.mark.parametrize(("encoding_cfg", "model", "steps"), [
    ({"name": "rope_1d"}, {}, 300),
    ({"name": "rel_bias_1d", "max_distance": 16}, {}, 300),  # saturated buckets seen in training
    ({"name": "alibi"}, {"causal": True, "depth": 3}, 600),   # ALiBi needs the causal mask for direction
])  # fmt: skip
def test_relative_encodings_copy_at_twice_the_training_length(encoding_cfg, model, steps, threads):
    acc = train_briefly({"name": "seq_copy", "task": "copy_offset"}, encoding_cfg, steps=steps, **model)
    assert acc[32] > 0.9 and acc[64] > 0.85, acc


@pytest.mark.slow
@pytest.mark.parametrize("encoding_cfg", [
    {"name": "learned_1d"},                        # positions 32..63 were never trained
    {"name": "rel_bias_1d", "max_distance": 128},  # buckets of distances 32..63 were never trained
])  # fmt: skip
def test_copy_fails_beyond_the_training_length_with_untrained_positions(encoding_cfg, threads):
    acc = train_briefly({"name": "seq_copy", "task": "copy_offset"}, encoding_cfg)
    assert acc[32] > 0.9 and acc[64] < 0.8, acc
