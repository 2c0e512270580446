import pytest

from vitpos.encodings import EncodingContext, PositionalEncoding, create_encoding, list_encodings

IMAGE_ENCODINGS = list_encodings(2)


def test_every_image_encoding_of_the_brief_is_registered():
    expected = {
        "none",
        "learned_1d",
        "learned_2d",
        "sincos_1d",
        "sincos_2d",
        "rel_bias_2d",
        "cpe",
        "rope_1d",
        "rope_2d",
        "rope_2d_mixed",
        "combo",
    }
    assert expected <= set(IMAGE_ENCODINGS)


@pytest.mark.parametrize("name", IMAGE_ENCODINGS)
def test_names_round_trip(name):
    pe = create_encoding(name, EncodingContext(32, 2, 2, (4, 4)))
    assert isinstance(pe, PositionalEncoding)
    assert pe.name == name
    assert pe.strategy in type(pe).strategies or name == "combo"


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(KeyError) as err:
        create_encoding("rope_3d", EncodingContext(32, 2, 2, (4, 4)))
    for name in IMAGE_ENCODINGS:
        assert name in str(err.value)


def test_unknown_option_names_the_accepted_ones():
    with pytest.raises(TypeError, match="temperature"):
        create_encoding("sincos_2d", EncodingContext(32, 2, 2, (4, 4)), temprature=100)


def test_unknown_strategy_lists_the_valid_ones():
    with pytest.raises(ValueError, match="extrapolate, interpolate"):
        create_encoding("sincos_2d", EncodingContext(32, 2, 2, (4, 4)), strategy="magic")


def test_rope_head_dim_error_names_the_sizes():
    with pytest.raises(ValueError, match="model.num_heads"):
        create_encoding("rope_2d", EncodingContext(36, 2, 2, (4, 4)))  # head dim 18: not a multiple of 4


def test_image_only_encoding_on_a_sequence_grid_says_so():
    with pytest.raises(ValueError, match="image"):
        create_encoding("sincos_2d", EncodingContext(32, 2, 2, (16,)))


@pytest.mark.parametrize("name", IMAGE_ENCODINGS)
def test_a_table_cached_during_evaluation_serves_a_training_backward(name):
    """Lightning validates under torch.inference_mode; a rotation, table or index
    first built there must not be an inference tensor the next training step
    cannot save for backward (it was, for rope_2d and rel_bias_2d)."""
    import torch

    from vitpos.models.vit import VisionTransformer

    torch.manual_seed(0)
    model = VisionTransformer(encoding=name, dim=32, depth=2, num_heads=2, drop_path=0.0)
    images = torch.randn(2, 3, 16, 16)
    with torch.inference_mode():
        model(images)
    model(images).sum().backward()
    assert model.patch_embed.weight.grad is not None
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize("name", [n for n in list_encodings(1) if n != "combo"])  # combo's default parts are 2D
def test_a_sequence_table_cached_during_evaluation_serves_a_training_backward(name):
    import torch

    from vitpos.models.seq_transformer import SequenceTransformer

    model = SequenceTransformer(encoding=name, dim=32, depth=2, num_heads=2, max_len=16)
    tokens = torch.randint(0, 17, (2, 16))
    with torch.inference_mode():
        model(tokens)
    model(tokens).sum().backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


# ------------------------------------------- what each class declares, and checks
def test_direct_geometry_equals_an_encoding_context():
    import torch

    torch.manual_seed(0)
    direct = create_encoding("rope_2d_mixed", dim=32, num_heads=2, grid=(4, 4), depth=2, num_prefix_tokens=1)
    torch.manual_seed(0)
    with_ctx = create_encoding("rope_2d_mixed", EncodingContext(32, 2, 2, (4, 4), 1))
    assert direct.ctx == with_ctx.ctx and torch.equal(direct.freqs, with_ctx.freqs)
    assert create_encoding("alibi", dim=32, num_heads=2, grid=16).ctx == EncodingContext(32, 2, 1, (16,), 0)


def test_direct_geometry_says_what_is_missing_or_doubled():
    with pytest.raises(TypeError, match="num_heads"):
        create_encoding("rope_2d", dim=32, grid=(4, 4))
    with pytest.raises(TypeError, match="not both"):
        create_encoding("rope_2d", EncodingContext(32, 2, 2, (4, 4)), dim=32)


@pytest.mark.parametrize("name", list_encodings())
def test_declared_options_are_the_accepted_ones(name):
    import inspect

    from vitpos.encodings import get_encoding_class

    cls = get_encoding_class(name)
    options = cls.option_names()
    assert options == sorted(options) and "ctx" not in options and "strategy" in options
    ctx = EncodingContext(32, 2, 2, (16,) if 1 in cls.grid_dims and name != "combo" else (4, 4))
    defaults = {o: cls.option_default(o) for o in options if cls.option_default(o) is not inspect.Parameter.empty}
    create_encoding(name, ctx, **defaults)  # every declared option is taken, with its declared default
    with pytest.raises(TypeError, match="valid options: " + ", ".join(options)):
        create_encoding(name, ctx, no_such_option=1)


@pytest.mark.parametrize("name", ["rope_1d", "rope_2d", "rope_1d_learned", "rope_2d_mixed"])
def test_linear_is_a_declared_alias_of_interpolate(name):
    from vitpos.encodings import get_encoding_class

    cls = get_encoding_class(name)
    assert cls.strategy_aliases == {"linear": "interpolate"}
    assert cls.valid_strategies() == (*cls.strategies, "linear")
    grid = (4, 4) if 2 in cls.grid_dims and 1 not in cls.grid_dims else (16,)
    pe = create_encoding(name, EncodingContext(32, 2, 2, grid), strategy="linear")
    assert pe.strategy == "interpolate"
    pe.strategy = "extrapolate"
    pe.strategy = "linear"
    assert pe.strategy == "interpolate"


def test_aliases_are_only_where_declared():
    from vitpos.encodings import get_encoding_class

    assert get_encoding_class("sincos_2d").valid_strategies() == ("extrapolate", "interpolate")
    with pytest.raises(ValueError, match=r"valid: extrapolate, interpolate \(set encoding.strategy=\.\.\.\)"):
        create_encoding("sincos_2d", EncodingContext(32, 2, 2, (4, 4)), strategy="linear")
    with pytest.raises(ValueError, match="aliases: linear = interpolate") as err:
        create_encoding("rope_2d", EncodingContext(32, 2, 2, (4, 4)), strategy="magic")
    assert err.value.option == "encoding.strategy"


@pytest.mark.parametrize(
    "name,option,value,fix",
    [
        ("rope_2d", "base", -1.0, "e.g. the default of rope_2d, 100.0"),
        ("rope_1d", "base", float("inf"), "e.g. the default of rope_1d, 10000.0"),
        ("rope_2d_mixed", "base", 0, "e.g. the default of rope_2d_mixed, 10.0"),
        ("sincos_2d", "temperature", float("nan"), "e.g. the default, 10000.0"),
        ("sincos_1d", "temperature", "big", "e.g. the default, 10000.0"),
        ("rope_2d", "scale", 0.0, "null: new size / training size"),
        ("rope_1d", "beta_fast", 0.5, "the defaults are 32 and 1"),
        ("cpe", "kernel_size", 4, "odd integer"),
        ("rel_bias_1d", "num_buckets", 2, "encoding.num_buckets="),
    ],
)
def test_bad_option_values_name_the_option_and_the_fix(name, option, value, fix):
    import re

    from vitpos.encodings import OptionError, get_encoding_class

    grid = (4, 4) if 2 in get_encoding_class(name).grid_dims else (16,)
    with pytest.raises(OptionError) as err:
        create_encoding(name, EncodingContext(32, 2, 2, grid), **{option: value})
    line = err.value.line()  # as the check says
    assert err.value.option == f"encoding.{option}" and re.search(re.escape(fix), line), line
    assert line.count(f"encoding.{option}") >= 1 and f"encoding.encoding.{option}" not in line


def test_scale_may_be_null():
    assert create_encoding("rope_2d", EncodingContext(32, 2, 2, (4, 4)), scale=None).scale is None
