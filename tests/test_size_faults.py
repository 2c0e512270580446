"""Image sizes the data cannot give, and ``--into`` paths the report rebuild cannot write.

``data=shapes`` draws two squares in different rows and columns of a grid of ``data.cell`` px
cells, and draws other sizes by giving each cell a whole number of pixels: a training size of
fewer than two cells a side, or a test size that splits a cell, used to pass the config check and
then fail in the generator (``RuntimeError: random_ expects 'from' < 'to'``, exit 1) or score NaN
after the whole run trained (exit 0). The rule is :mod:`vitpos.data.shapes`' own; the config check
runs it before anything is written. ``scripts/rebuild_reports.py --into FILE`` used to raise
``NotADirectoryError`` from ``mkdir``; it is refused in one line, exit 2, nothing written.
"""

from __future__ import annotations

import pytest
from conftest import compose_train, run_command

from vitpos.checks.data import eval_resolutions
from vitpos.data.shapes import MIN_CELLS, can_draw, check_layout, make_shapes, smallest_img_size
from vitpos.errors import UserError
from vitpos.sizes import as_hw
from vitpos.validate import validate

TINY = [
    "data=shapes", "model=vit_micro", "trainer.max_epochs=1", "+trainer.limit_train_batches=5",
    "+trainer.limit_val_batches=2", "data.num_test=64", "eval.resolutions=[]", "task.pictures=false", "threads=1",
]  # fmt: skip


def tiny(*args: str) -> list[str]:
    """A tiny shapes run with ``args``: ``TINY`` less the options ``args`` set, then ``args``."""
    keys = {a.split("=")[0] for a in args}
    return [t for t in TINY if t.split("=")[0].lstrip("+") not in keys] + list(args)


def refused(tmp_path, *args: str) -> str:
    """``python train.py TINY ARGS run.root=runs`` run in ``tmp_path``: the one ``error:`` line it
    exits 2 with, after checking that nothing (no run folder, no Hydra output) was written."""
    ran = run_command("train.py", *tiny(*args), "run.root=runs", cwd=tmp_path)
    errors = [line for line in ran.err.splitlines() if line.startswith("error: ")]
    assert ran.code == 2 and len(errors) == 1 and "Traceback" not in ran.out + ran.err, ran.out + ran.err
    assert list(tmp_path.iterdir()) == [], "something was written"
    return errors[0]


# ------------------------------------------------------------------ a training size below two cells
@pytest.mark.parametrize(
    "size, line",
    [
        (
            "[4,32]",
            "error: data.img_size: [4, 32] is too small for data=shapes: 1x8 cells of data.cell=4 px, and its two "
            "squares need 2 rows and 2 columns of cells (the smallest is 8 px a side: data.img_size=[8,32])",
        ),
        (
            "4",
            "error: data.img_size: 4 is too small for data=shapes: 1x1 cells of data.cell=4 px, and its two "
            "squares need 2 rows and 2 columns of cells (the smallest is 8 px a side: data.img_size=8)",
        ),
    ],
    ids=["pair", "side"],
)
def test_a_shapes_size_below_two_cells_is_refused_before_anything_is_written(tmp_path, size, line):
    assert refused(tmp_path, f"data.img_size={size}") == line


@pytest.mark.parametrize("args", [["data.img_size=[8,32]"], ["data.img_size=8"], ["data.img_size=16", "data.cell=8"]])
def test_the_smallest_shapes_size_the_message_offers_passes_the_check(args):
    validate(compose_train(*tiny(*args)))  # raises on a refusal


def test_a_larger_cell_raises_the_smallest_size(tmp_path):
    line = refused(tmp_path, "data.img_size=8", "data.cell=8")
    assert line.startswith("error: data.img_size: 8 is too small for data=shapes: 1x1 cells of data.cell=8 px")
    assert line.endswith("(the smallest is 16 px a side: data.img_size=16)")


def test_a_size_that_splits_a_cell_is_refused_with_the_nearest_whole_cells(tmp_path):
    line = refused(tmp_path, "data.img_size=18", "model.patch_size=2")
    assert line == (
        "error: data.img_size: 18 is not a multiple of data.cell=4 on each side (data=shapes draws whole cells) "
        "(e.g. 16 or 20)"
    )


@pytest.mark.parametrize("cell", [1, 2, 4, 8])
def test_the_layout_rule_is_the_generators_limit(cell):
    """Every side ``check_layout`` accepts draws, every side it refuses fails in ``make_shapes``
    with the same refusal: the check and the generator cannot disagree. The smallest accepted side
    is ``smallest_img_size`` = two cells, and every label is drawn there."""
    for side in range(1, 4 * cell + 1):
        try:
            rows, cols = check_layout((side, side), cell)
        except UserError as err:
            with pytest.raises(UserError) as caught:
                make_shapes(2, side, cell)
            assert str(caught.value) == str(err)
            assert side < smallest_img_size(cell) or side % cell
        else:
            assert (rows, cols) == (side // cell, side // cell) and rows >= MIN_CELLS
            images, _ = make_shapes(2, side, cell)
            assert images.shape == (2, 3, side, side)
    _, labels = make_shapes(400, smallest_img_size(cell), cell)
    assert set(labels.tolist()) == {0, 1, 2, 3}
    assert smallest_img_size(4) == 8 and smallest_img_size(4, patch=16) == 16 and smallest_img_size(4, patch=3) == 12


# ------------------------------------------------------------------ a test size that splits a cell
@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["data.img_size=[16,32]", "eval.resolutions=[[16,36]]"],
            "error: eval.resolutions[0]: data=shapes cannot draw [16, 36] px images: its 4x8 cells "
            "(data.img_size=[16,32] / data.cell=4) need a whole number of pixels each, a height that is a multiple "
            "of 4 and a width that is a multiple of 8 (e.g. [16,32] or [16,40])",
        ),
        (
            ["eval.resolutions=[36]"],
            "error: eval.resolutions[0]: data=shapes cannot draw 36 px images: its 8x8 cells (data.img_size=32 / "
            "data.cell=4) need a whole number of pixels each, a side that is a multiple of 8 (e.g. 32 or 40)",
        ),
        (
            ["eval.resolutions=[32,4]"],
            "error: eval.resolutions[1]: data=shapes cannot draw 4 px images: its 8x8 cells (data.img_size=32 / "
            "data.cell=4) need a whole number of pixels each, a side that is a multiple of 8 "
            "(the smallest it can draw is 8)",
        ),
    ],
    ids=["pair-36", "side-36", "side-4"],
)
def test_a_test_size_that_splits_a_cell_is_refused_before_training(tmp_path, args, line):
    """It used to train the whole run, then log ``test/acc@res16x36 nan`` and exit 0."""
    assert refused(tmp_path, *args) == line


@pytest.mark.parametrize("size", [1, 4, 8, 12, 16, 18, 20, 24, 36, 40, 48, 64, (8, 8), (12, 40), (16, 36), (20, 48)])
def test_the_drawing_rule_is_the_generators_limit(size):
    """``can_draw`` (the check's rule) answers yes exactly where ``make_shapes`` draws the layout of
    ``[12, 32]`` (3x8 cells); where it says no, the generator refuses with a UserError."""
    img_size, cell = [12, 32], 4
    if can_draw(as_hw(size), as_hw(img_size), cell):
        images, _ = make_shapes(2, img_size, cell, size=size)
        assert images.shape[-2:] == ((size, size) if isinstance(size, int) else size)
    else:
        with pytest.raises(UserError, match=r"^eval.resolutions: data=shapes cannot draw .* 3x8 cells"):
            make_shapes(2, img_size, cell, size=size)


@pytest.mark.parametrize(
    "img_size, expected",
    [(32, [16, 24, 32, 40, 48, 64]), (24, [12, 24, 36, 48]), ([16, 32], [[8, 16], [12, 24], [16, 32], [20, 40],
                                                                          [24, 48], [32, 64]])],
)  # fmt: skip
def test_auto_resolutions_on_shapes_are_the_sizes_it_can_draw(img_size, expected):
    """``eval.resolutions=auto`` on shapes keeps only the drawable sizes of the default list (at 24 px,
    20 and 32 split its 6x6 cells); at 32 px it is the list it always was."""
    c = {"data": {"name": "shapes", "img_size": img_size, "cell": 4}, "model": {"patch_size": 4}}
    assert eval_resolutions({**c, "eval": {"resolutions": "auto"}}) == expected


# ------------------------------------------------------------------ rebuild_reports --into a file
@pytest.fixture
def rebuild_reports():
    from scripts import rebuild_reports

    return rebuild_reports


def refused_rebuild(rebuild_reports, capsys, argv: list[str]) -> str:
    """``python scripts/rebuild_reports.py ARGV``: the one line it exits 2 with; docs/results untouched."""
    before = sorted(rebuild_reports.RESULTS.rglob("*"))
    assert rebuild_reports.main(argv) == 2
    captured = capsys.readouterr()
    assert "rewriting" not in captured.out, captured.out
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert sorted(rebuild_reports.RESULTS.rglob("*")) == before
    return lines[0]


def test_rebuild_into_an_existing_file_is_refused_in_one_line(tmp_path, rebuild_reports, capsys):
    file = tmp_path / "notes.txt"
    file.write_text("mine\n")
    line = refused_rebuild(rebuild_reports, capsys, ["extrapolation_aspect", "--into", str(file)])
    assert line == f"error: --into: {file} is a file, not a folder (give a folder to write the reports into, " \
                   "e.g. --into /tmp/reports)"  # fmt: skip
    assert file.read_text() == "mine\n" and sorted(tmp_path.iterdir()) == [file]


def test_rebuild_into_a_path_under_a_file_is_refused_in_one_line(tmp_path, rebuild_reports, capsys):
    file = tmp_path / "notes.txt"
    file.write_text("mine\n")
    line = refused_rebuild(rebuild_reports, capsys, ["--into", str(file / "reports"), "extrapolation_aspect"])
    assert line.startswith(f"error: --into: {file / 'reports'} lies under the file {file}, not a folder (give ")
    assert sorted(tmp_path.iterdir()) == [file]


def test_rebuild_into_a_folder_holding_a_file_where_the_report_goes_is_refused(tmp_path, rebuild_reports, capsys):
    (tmp_path / "extrapolation_aspect").write_text("mine\n")
    line = refused_rebuild(rebuild_reports, capsys, ["--into", str(tmp_path), "extrapolation_aspect"])
    assert line.startswith(f"error: --into: {tmp_path / 'extrapolation_aspect'} is a file, not the folder of report")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["extrapolation_aspect"]
