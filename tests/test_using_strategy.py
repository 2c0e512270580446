"""``encoding.using_strategy(name)``: another strategy for the length of a ``with`` block, the one
before it afterwards, whatever happens inside; set through ``strategy``, so an alias resolves, an
unknown name fails as setting it does, and a combination switches its parts."""

import pytest
from conftest import make_encoding

from vitpos.encodings import OptionError


def test_the_strategy_holds_inside_the_block_and_returns_after_it():
    pe = make_encoding("rope_2d")
    assert pe.strategy == "extrapolate"
    with pe.using_strategy("ntk") as inside:
        assert inside is pe and pe.strategy == "ntk"
    assert pe.strategy == "extrapolate"


def test_an_alias_resolves_as_setting_it_does():
    pe = make_encoding("rope_2d")
    with pe.using_strategy("linear"):
        assert pe.strategy == "interpolate"
    assert pe.strategy == "extrapolate"


def test_the_strategy_returns_after_an_exception_inside_the_block():
    pe = make_encoding("rope_2d", strategy="yarn")
    with pytest.raises(RuntimeError, match="inside"):
        with pe.using_strategy("interpolate"):
            assert pe.strategy == "interpolate"
            raise RuntimeError("inside")
    assert pe.strategy == "yarn"


def test_nested_blocks_return_one_at_a_time():
    pe = make_encoding("rope_2d")
    with pe.using_strategy("ntk"):
        with pe.using_strategy("dynamic"):
            assert pe.strategy == "dynamic"
            with pe.using_strategy("ntk"):
                assert pe.strategy == "ntk"
            assert pe.strategy == "dynamic"
        assert pe.strategy == "ntk"
    assert pe.strategy == "extrapolate"


@pytest.mark.parametrize("name, options", [("rope_2d", {}), ("learned_2d", {}),
                                           ("combo", {"parts": ["rope_2d_mixed", "learned_1d"]})])  # fmt: skip
def test_an_unknown_strategy_fails_as_setting_it_does(name, options):
    pe = make_encoding(name, **options)
    before = pe.strategy
    with pytest.raises(OptionError) as assigned:
        pe.strategy = "bicubic"
    assert pe.strategy == before
    with pytest.raises(OptionError) as switched:
        with pe.using_strategy("bicubic"):
            pytest.fail("the block runs under an unknown strategy")
    assert type(switched.value) is type(assigned.value) and str(switched.value) == str(assigned.value)
    assert "bicubic" in str(switched.value)
    assert pe.strategy == before


def test_a_combination_switches_its_parts_and_returns_them():
    pe = make_encoding("combo", parts=["rope_2d_mixed", "learned_1d"])
    rope, table = pe.parts
    assert (pe.strategy, rope.strategy, table.strategy) == ("extrapolate+interpolate", "extrapolate", "interpolate")
    with pe.using_strategy("interpolate"):  # both parts know it
        assert (rope.strategy, table.strategy) == ("interpolate", "interpolate")
    with pe.using_strategy("error"):  # only the table knows it: the RoPE part keeps its own
        assert (rope.strategy, table.strategy) == ("extrapolate", "error")
    with pe.using_strategy("interpolate+error"):  # one per part, as the strategy reads
        assert (rope.strategy, table.strategy) == ("interpolate", "error")
    with pytest.raises(KeyError):
        with pe.using_strategy("linear"):  # an alias of the RoPE part's
            assert (rope.strategy, table.strategy) == ("interpolate", "interpolate")
            raise KeyError("inside")
    assert (pe.strategy, rope.strategy, table.strategy) == ("extrapolate+interpolate", "extrapolate", "interpolate")


def test_a_combination_half_switched_by_a_bad_pair_returns_whole():
    """``a+b`` sets the parts one after the other: a bad second name leaves the first part switched
    until the block's exit puts it back."""
    pe = make_encoding("combo", parts=["rope_2d_mixed", "learned_1d"])
    with pytest.raises(OptionError, match="bicubic"):
        with pe.using_strategy("interpolate+bicubic"):
            pytest.fail("the block runs under an unknown strategy")
    assert pe.strategy == "extrapolate+interpolate"
