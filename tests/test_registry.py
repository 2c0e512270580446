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
