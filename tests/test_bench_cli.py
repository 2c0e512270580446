"""The benchmark command's row filters (``--shapes``, ``--encodings``) refuse unknown names with the
valid ones, before any model is built; the README's ``bench.run`` replays run the tables themselves."""

import pytest

from bench.run import main, split_list


def test_split_list_keeps_order_and_drops_blanks():
    assert split_list("vit_tiny, learned_1d,,") == ["vit_tiny", "learned_1d"]
    assert split_list(None) is None


@pytest.mark.parametrize(
    ("option", "value", "valid"),
    [("--shapes", "vit_big", "vit_micro, vit_tiny"), ("--encodings", "learned_3d", "learned_1d")],
)
def test_step_filters_refuse_unknown_names(option, value, valid):
    with pytest.raises(SystemExit) as stop:
        main(["step", "--quick", option, value])
    assert f"error: {option}: unknown {value}; valid: " in str(stop.value.code)
    assert valid in str(stop.value.code)
