"""Resolution extrapolation: named strategies per encoding family."""

import pytest
import torch
from conftest import EvalModule, make_encoding, small_vit

from vitpos.encodings import functional as fn
from vitpos.encodings import list_encodings
from vitpos.encodings.sincos import axis_positions
from vitpos.extrapolate import choose_strategies, evaluate_sizes, strategies_of

IMAGE_ENCODINGS = list_encodings(2)


def strategy_cases():
    for name in IMAGE_ENCODINGS:
        model = small_vit(name)
        for strategy in strategies_of(model.pos):
            yield name, strategy


@pytest.mark.parametrize("name,strategy", list(strategy_cases()))
def test_every_strategy_is_the_identity_at_the_training_resolution(name, strategy):
    model = small_vit(name)
    images = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        reference = model(images)
        model.pos.strategy = strategy
        torch.testing.assert_close(model(images), reference)


@pytest.mark.parametrize("name,strategy", list(strategy_cases()))
@pytest.mark.parametrize("size", [12, 24, 32])  # trained at 16 (a 4x4 grid)
def test_every_strategy_runs_at_other_resolutions(name, strategy, size):
    model = small_vit(name)
    model.pos.strategy = strategy
    with torch.no_grad():
        out = model(torch.randn(2, 3, size, size))
    assert out.shape == (2, 10) and torch.isfinite(out).all()


@pytest.mark.parametrize("name", ["learned_1d", "learned_2d"])
def test_error_strategy_names_the_option_to_change(name):
    model = small_vit({"name": name, "strategy": "error"})
    model(torch.randn(1, 3, 16, 16))  # the training grid is fine
    with pytest.raises(ValueError, match="encoding.strategy=interpolate"):
        model(torch.randn(1, 3, 24, 24))


def test_resolution_not_divisible_by_the_patch_says_so():
    with pytest.raises(ValueError, match="model.patch_size=4"):
        small_vit("rope_2d")(torch.randn(1, 3, 18, 18))


def test_interpolating_a_learned_table_to_its_own_size_returns_it_unchanged():
    table = torch.randn(16, 8)
    assert torch.equal(fn.resample_table_2d(table, (4, 4), (4, 4)), table)
    assert torch.equal(fn.resample_table_1d(table, 16), table)
    pe = make_encoding("learned_1d")
    assert pe.table_for((4, 4)) is pe.table


def test_position_interpolation_maps_extremes_onto_the_training_extremes():
    for n in (3, 6, 12):
        pos = axis_positions(n, 4, interpolate=True, image=True)
        assert pos[0] == 0 and pos[-1] == pytest.approx(3.0)
        assert torch.all(pos[1:] > pos[:-1])
    seq = axis_positions(128, 64, interpolate=True, image=False)
    torch.testing.assert_close(seq, torch.arange(128.0) / 2)  # positions / s with s = 2


def test_align_ratio_maps_positions_by_the_size_ratio_and_leaves_sequences_alone():
    torch.testing.assert_close(axis_positions(8, 4, True, True, "ratio"), torch.arange(8.0) / 2)
    torch.testing.assert_close(axis_positions(8, 4, True, True, "corners"), torch.arange(8.0) * 3 / 7)
    torch.testing.assert_close(axis_positions(128, 64, True, False, "corners"), torch.arange(128.0) / 2)
    pe = make_encoding("sincos_2d", strategy="interpolate", align="ratio")
    corners = make_encoding("sincos_2d", strategy="interpolate")
    cpu = torch.device("cpu")
    assert not torch.allclose(pe.table_for((8, 8), cpu), corners.table_for((8, 8), cpu))


@pytest.mark.parametrize(
    "name,option,fix",
    [
        ("sincos_2d", {"align": "center"}, "encoding.align"),
        ("rope_2d", {"align": "center"}, "encoding.align"),
        ("rope_2d_mixed", {"align": "center"}, "encoding.align"),
        ("learned_1d", {"antialias": "never"}, "encoding.antialias"),
        ("learned_2d", {"antialias": "never"}, "encoding.antialias"),
        ("rope_2d", {"yarn_ramp": "paper"}, "encoding.yarn_ramp"),
    ],
)
def test_bad_resize_options_name_the_option_and_the_valid_values(name, option, fix):
    with pytest.raises(ValueError, match=fix):
        make_encoding(name, **option)


@pytest.mark.parametrize("old,new", [((8, 8), (4, 4)), ((8, 8), (6, 6)), ((4, 4), (8, 8)), ((6, 6), (3, 9))])
def test_learned_2d_resizes_like_the_full_table(old, new):
    # the row/column tables resized on their own equal the full table resized bicubically,
    # so a smaller grid keeps one distinct row vector per row
    pe = make_encoding("learned_2d", grid=old)
    full = pe.table_for(old).detach()
    torch.testing.assert_close(pe.table_for(new), fn.resample_table_2d(full, old, new), rtol=1e-5, atol=1e-5)
    rows = pe.table_for(new).reshape(*new, -1)[:, 0, :16]
    assert torch.cdist(rows, rows).add(torch.eye(new[0])).min() > 1e-3


@pytest.mark.parametrize("old,new", [((8, 8), (4, 1)), ((8, 8), (1, 4)), ((4, 4), (8, 1)), ((6, 1), (3, 1))])
def test_resize_to_a_single_column_or_row_is_not_the_first_row(old, new):
    table = torch.randn(old[0] * old[1], 4)
    out = fn.resample_table_2d(table, old, new).reshape(*new, 4)
    flat = out.reshape(-1, 4)
    assert (flat[1:] - flat[0]).abs().amax(-1).min() > 1e-3  # distinct outputs along the long axis


def test_rope_interpolate_on_images_rotates_the_last_token_like_the_trained_last_one():
    pe = make_encoding("rope_2d", grid=(4, 4), strategy="interpolate")
    trained = pe.rotation((4, 4), 0, torch.device("cpu"))
    bigger = pe.rotation((8, 8), 0, torch.device("cpu"))
    torch.testing.assert_close(bigger[-1], trained[-1])
    torch.testing.assert_close(bigger[0], trained[0])


def test_relative_bias_strategies_interpolate_or_clamp():
    pe = make_encoding("rel_bias_2d", grid=(4, 4))
    dev, dt = torch.device("cpu"), torch.float32
    pe.strategy = "clamp"
    clamped = pe.attention_bias((6, 6), 0, dev, dt)  # offsets beyond +-3 reuse the edge entries
    trained = pe.attention_bias((4, 4), 0, dev, dt)
    torch.testing.assert_close(clamped[:, 0, 1], trained[:, 0, 1])  # offset (0, -1) is a trained one
    torch.testing.assert_close(clamped[:, 0, 5], clamped[:, 0, 4])  # dx -5 clamped to -3 like dx -4
    pe.strategy = "interpolate"
    interp = pe.attention_bias((6, 6), 0, dev, dt)
    assert interp.shape == (2, 36, 36) and not torch.allclose(interp, clamped)


class _Images:
    """A stand-in data module: random test images at any resolution."""

    def test_dataloader_at(self, size):
        g = torch.Generator().manual_seed(size)
        return [(torch.randn(8, 3, size, size, generator=g), torch.randint(0, 10, (8,), generator=g))]


def test_evaluator_names_metrics_per_strategy_and_restores_the_default():
    module = EvalModule(small_vit("rope_2d"))
    strategies = choose_strategies(module.encoding, "all")
    assert strategies[0] == "extrapolate" and set(strategies) == {
        "extrapolate",
        "interpolate",
        "ntk",
        "dynamic",
        "yarn",
    }
    results = evaluate_sizes(module, _Images(), [12, 16, 24], strategies, "res", progress=False)
    assert {"test/acc@res24", "test/acc@res24/ntk", "test/loss@res12/yarn"} <= set(results)
    # at the training resolution every strategy gives the same numbers
    assert len({results[k] for k in results if k.startswith("test/acc@res16")}) == 1
    assert module.encoding.strategy == "extrapolate"


def test_evaluator_records_a_refusal_as_nan():
    module = EvalModule(small_vit({"name": "learned_1d", "strategy": "error"}))
    results = evaluate_sizes(module, _Images(), [16, 24], ["error"], "res", progress=False)
    assert results["test/acc@res16"] >= 0 and results["test/acc@res24"] != results["test/acc@res24"]  # NaN


@pytest.mark.parametrize(("precision", "dtype"), [("bf16-mixed", torch.bfloat16), ("32-true", None), (None, None)])
def test_evaluator_scores_in_the_precision_the_run_tested_in(precision, dtype):
    """A bf16-mixed run's test/acc comes from Lightning's test under bf16 autocast, so the
    other sizes (and standalone extrapolation) are scored under the same autocast; fp32 runs without."""
    seen = []

    class Probe(EvalModule):
        def evaluate_batch(self, batch):
            seen.append(torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None)
            return super().evaluate_batch(batch)

    results = evaluate_sizes(Probe(small_vit("rope_2d")), _Images(), [16, 24], ["extrapolate"], "res",
                             progress=False, precision=precision)  # fmt: skip
    assert seen == [dtype, dtype] and set(results) == {"test/acc@res16", "test/loss@res16", "test/acc@res24",
                                                      "test/loss@res24"}  # fmt: skip


@pytest.mark.parametrize("name", IMAGE_ENCODINGS)
def test_class_token_models_run_at_other_resolutions(name):
    model = small_vit(name, pool="cls")
    with torch.no_grad():
        out = model(torch.randn(2, 3, 24, 24))
    assert torch.isfinite(out).all()
