"""The table and the picture of ``python -m vitpos.extrapolate``: the squares first, by side, then
the ``h x w`` sizes (wide before tall); in the picture a tick exactly at each size tested, none
overprinting another, a title saying what was evaluated and a legend that explains the triangles
and the hollow markers."""

import pandas as pd

from vitpos.extrapolate.checkpoints import write_outputs
from vitpos.extrapolate.plot import plot_curves
from vitpos.sizes import column_order

SIZES = [(16, "downsampled"), ("16x32", "upsampled"), (24, "downsampled"), ("32x16", "upsampled"), (32, "native")]


def rows(runs=("rope_2d/seed0", "learned_1d/seed0")) -> list[dict]:
    """Rows as the tool writes them, sizes in order of pixels (the order the evaluation may give)."""
    row = {"strategy": "default", "kind": "res", "test_images": 100}
    return [
        {**row, "run": run, "size": size, "resampling": resampling, "acc": 0.5 + 0.01 * i + 0.1 * j}
        for j, run in enumerate(runs)
        for i, (size, resampling) in enumerate(SIZES)
    ]


def test_squares_come_first_by_side_then_wide_before_tall():
    assert sorted([32, [32, 16], 16, 24, [16, 32], "48x16", 64], key=column_order) == [
        16, 24, 32, 64, [16, 32], [32, 16], "48x16"]  # fmt: skip


def test_the_table_lists_the_squares_then_the_other_sizes(tmp_path):
    table = write_outputs(rows(), tmp_path, plot=False)
    header = table.splitlines()[0]
    assert header == "| run | strategy | 16 | 24 | 32 | 16x32 (upsampled) | 32x16 (upsampled) |", header
    assert (tmp_path / "extrapolation.md").read_text().splitlines()[0] == header


def test_the_picture_ticks_each_size_tested_and_explains_its_markers(tmp_path):
    fig = plot_curves(pd.DataFrame(rows()), tmp_path / "extrapolation.png")
    assert (tmp_path / "extrapolation.png").stat().st_size > 0
    (ax,) = fig.axes
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["16", "24", "32", "16x32", "32x16"], labels
    ticks = sorted(ax.get_xticks())
    span = ticks[-1] - ticks[0]
    assert min(b - a for a, b in zip(ticks, ticks[1:])) >= 0.1 * span, ticks  # no label overprints another
    assert ticks[:3] == [16, 24, 32]  # the squares at their sides
    assert ax.get_title().startswith("test accuracy at other sizes") and "image resolutions" in ax.get_title()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"rope_2d/seed0 (default)", "learned_1d/seed0 (default)"} <= set(legend)
    assert any(text.startswith("wide h x w") for text in legend), legend
    assert any(text.startswith("tall h x w") for text in legend), legend
    assert any(text.startswith("hollow: upsampled") for text in legend), legend


def test_a_picture_of_squares_only_has_no_triangles_in_its_legend(tmp_path):
    frame = pd.DataFrame([r for r in rows(("one/seed0",)) if "x" not in str(r["size"])])
    (ax,) = plot_curves(frame, tmp_path / "extrapolation.png").axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["16", "24", "32"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["one/seed0 (default)"]
    assert ax.get_title() == "test accuracy at other sizes: image resolutions"
