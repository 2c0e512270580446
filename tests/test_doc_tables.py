"""The tables the README and the docs quote are generated from the committed reports
(scripts/doc_pages.py, scripts/doc_tables.py) and cannot drift from them; they read the
training protocol from columns, never from the ``budget`` sentence."""

import csv
from dataclasses import replace

import pytest

from scripts.doc_pages import PAGES, TABLES, blocks, generate, refresh
from scripts.doc_tables import aspect_table, comparison_headline, lever_table, multires_vs_single, native_headline
from scripts.report_rows import RESULTS, read_csv, read_report, training_of
from vitpos.compare.protocol import Protocol

SINGLE = Protocol("cifar10", epochs=13, img_size=16, native_size=32)  # trained at 16 px, tested up to 64
MULTI = Protocol("cifar10", epochs=9, img_size=32, native_size=32, train_sizes=(16, 24, 32))


def test_every_committed_page_quotes_its_report_as_generated():
    quoted = set()
    for page in PAGES:
        for name, body in blocks(page.read_text()):
            assert body == generate(name) + "\n", (
                f"{page.name}: the table {name!r} differs from its committed report; "
                "run `python scripts/rebuild_reports.py` (it rewrites the block) instead of editing it by hand"
            )
            quoted.add(name)
    assert quoted == set(TABLES), f"tables no page quotes: {sorted(set(TABLES) - quoted)}"


def row(label, protocol, **acc):
    """A report.csv row with its protocol columns; ``acc`` maps "32" / "48up" / "32_interpolate"
    to an accuracy fraction."""
    columns = {f"test/acc@res{key.replace('_', '/')}_mean": str(value) for key, value in acc.items()}
    return {"label": label, "budget": protocol.budget(), **protocol.columns(), **columns}


REPORT = [
    row("rope_2d-aaaaaa", SINGLE, **{"16": 0.64, "32": 0.37, "32_interpolate": 0.625, "64up": 0.25}),
    row("learned_2d-bbbbbb", SINGLE, **{"16": 0.647, "32": 0.612, "32_interpolate": 0.612, "64up": 0.41}),
    row("rope_2d-cccccc", MULTI, **{"16": 0.573, "32": 0.615, "32_interpolate": 0.59, "64up": 0.384}),
]


def test_the_training_of_a_row_comes_from_its_columns_and_names_its_size_schedule():
    """Two schedules over the same sizes and epochs are told apart wherever a table describes
    the training; a row trained at its native size only has no train size to name."""
    random = training_of(row("a", MULTI))
    split = training_of(row("b", replace(MULTI, size_schedule="progressive", size_epochs=(5, 3, 3))))
    even = training_of(row("c", replace(MULTI, size_schedule="progressive")))
    assert (random.schedule, split.schedule, even.schedule) == ("", "progressive 5/3/3", "progressive")
    assert random.describe() == "16-32 px, 9 epochs"
    assert split.describe() == "16-32 px, 9 epochs, progressive 5/3/3"
    assert split.multi_resolution and split.smallest == 16 and split.native == 32
    single = training_of(row("d", SINGLE))
    assert (single.sizes, single.smallest, single.multi_resolution) == ("16", 16, False)
    with pytest.raises(ValueError, match="names no train size"):
        training_of(row("e", replace(SINGLE, img_size=32)))
    # the same columns as a CSV holds them (strings; empty cells for None) say the same
    as_csv = {k: "" if v is None else str(v) for k, v in row("b", replace(MULTI, size_schedule="progressive",
                                                                          size_epochs=(5, 3, 3))).items()}  # fmt: skip
    assert training_of(as_csv) == split


def test_a_report_row_takes_the_protocol_of_its_runs_and_refuses_a_row_without_one(tmp_path):
    """read_report joins each report.csv row with the protocol of its runs in the snapshot."""
    rows = read_report(RESULTS / "extrapolation_native")
    assert rows and all(r["native_size"] == 32 and r["epochs"] in (9, 13) for r in rows)
    assert {training_of(r).multi_resolution for r in rows} == {True, False}
    (tmp_path / "runs").mkdir()
    (tmp_path / "report.csv").write_text('task,model,budget,label\ng,m,"cifar10, full train set",none-aaaaaa\n')
    with pytest.raises(ValueError, match="no run with a saved config .* 'none-aaaaaa'"):
        read_report(tmp_path)


def test_the_headline_takes_single_size_runs_only_and_names_a_better_strategy():
    lines = native_headline(REPORT).splitlines()
    assert lines[0] == "| encoding | 16 px | 32 px, default strategy | 32 px, best strategy | 64 px (upsampled) |"
    # best native score first; the multi-resolution rope_2d (61.5 at 32 px) never enters this table
    assert lines[2:] == [
        "| `rope_2d` | 64.0 | 37.0 | 62.5 (interpolate) | 25.0 |",
        "| `learned_2d` | 64.7 | 61.2 | 61.2 | 41.0 |",  # a strategy that only ties the default is not named
    ]


def test_the_multires_table_marks_upsampled_sizes_and_adds_up_as_printed():
    lines = multires_vs_single(REPORT).splitlines()
    assert lines[0] == "| encoding | training | 16 px | 32 px (native) | 64 px (up) | 32 px - 16 px |"
    assert lines[2:5] == [
        "| `rope_2d` | 16 px, 13 epochs | 64.0 | 37.0 | 25.0 | -27.0 |",
        "| `rope_2d` (interpolate) | 16 px, 13 epochs | 64.0 | 62.5 | - | -1.5 |",
        "| `rope_2d` | 16-32 px, 9 epochs | 57.3 | 61.5 | 38.4 | +4.2 |",  # its default strategy only
    ]
    # no multi-resolution run: last
    assert lines[5] == "| `learned_2d` | 16 px, 13 epochs | 64.7 | 61.2 | 41.0 | -3.5 |"


def test_the_aspect_table_puts_non_square_sizes_between_the_squares_and_adds_up_as_printed():
    """Height x width, as the run logged it: 16x32 (wide) and 32x16 (tall) are columns of their own
    between 16 and 32 px, ranked by their mean; each change is taken from the train size."""
    aspect = [
        row("rope_2d-aaaaaa", SINGLE, **{"16": 0.60, "16x32": 0.45, "32x16": 0.47, "32": 0.37}),
        row("learned_2d-bbbbbb", SINGLE, **{"16": 0.604, "16x32": 0.556, "32x16": 0.55, "32": 0.51}),
    ]
    lines = aspect_table(aspect).splitlines()
    assert lines[0] == "| encoding | 16 px | 16x32 px | 32x16 px | 32 px | 16x32 - 16 px | 32x16 - 16 px |"
    assert lines[2:] == [
        "| `learned_2d` | 60.4 | 55.6 | 55.0 | 51.0 | -4.8 | -5.4 |",
        "| `rope_2d` | 60.0 | 45.0 | 47.0 | 37.0 | -15.0 | -13.0 |",
    ]
    with pytest.raises(ValueError, match="no non-square size"):
        aspect_table(REPORT[:2])


def test_the_comparison_headline_counts_position_parameters_against_none_and_keeps_one_budget():
    budget = "cifar10, full train set × 13 epochs"

    def summary(label, test, val, group="a", ci=("", "")):
        return {"label": label, "budget": budget, "test/acc_mean": test, "test/acc_std": "0.01",
                "val/acc_best_mean": val, "val/acc_best_std": "", "test/acc_group": group,
                "test/acc_ci_low": ci[0], "test/acc_ci_high": ci[1]}  # fmt: skip

    def run(label, seed, params, fit, status="complete"):
        return {"label": label, "seed": str(seed), "params": params, "time/fit_min": fit, "time/eval_min": "0.5",
                "status": status}  # fmt: skip

    report = [summary("none-111111", "0.60", "0.61", "b"), summary("cpe-222222", "0.70", "0.71", "a", ("0.68", "0.72"))]
    runs = [run("none-111111", 0, "1000", "8"), run("cpe-222222", 1, "1640", "9.0"),
            run("cpe-222222", 0, "1640", "8.1"), run("cpe-222222", 2, "1640", "1.0", status="failed")]  # fmt: skip
    lines = comparison_headline(report, runs).splitlines()
    assert lines[0].endswith("| run min (by seed) |")  # the encodings ran different seeds
    assert lines[2:] == [
        "| `cpe` | 640 | **70.0 ± 1.0** | 68.0–72.0 | a | 71.0 ± 0.0 | 8.6 / 9.5 |",  # seeds in order, not the failed
        "| `none` | 0 | 60.0 (1 seed) | one seed | b | 61.0 (1 seed) | 8.5 |",  # one seed: no spread to print
    ]
    # not distinguishable from the best (a shared letter): bold as well, no ranking inside the noise
    tied = comparison_headline([{**report[0], "test/acc_group": "ab"}, report[1]], runs).splitlines()
    assert tied[3].startswith("| `none` | 0 | **60.0 (1 seed)** |")
    with pytest.raises(ValueError, match="one budget"):
        comparison_headline([*report, {**report[0], "budget": "cifar10, 6,000 images × 8 epochs"}], runs)
    # flip test-time augmentation: a column beside the plain score once every row has it
    flipped = [{**report[0], "test/acc_flip_mean": "0.605", "test/acc_flip_std": "0.005"},
               {**report[1], "test/acc_flip_mean": "0.71", "test/acc_flip_std": ""}]  # fmt: skip
    lines = comparison_headline(flipped, runs).splitlines()
    assert lines[0].startswith("| encoding | position params | test acc (%) | 95% interval | group | flip TTA (%) |")
    assert lines[2] == "| `cpe` | 640 | **70.0 ± 1.0** | 68.0–72.0 | a | 71.0 ± 0.0 | 71.0 ± 0.0 | 8.6 / 9.5 |"
    assert lines[3] == "| `none` | 0 | 60.0 (1 seed) | one seed | b | 60.5 (1 seed) | 61.0 (1 seed) | 8.5 |"


def test_the_lever_table_puts_base_first_and_counts_every_minute():
    val = {"bs256": "0.66", "progressive_e20": "0.70", "base": "0.65", "p12": "0.62"}  # no_epochs: none

    def lever(label, protocol, test, flip, fit, evaluation):
        return {"label": label, **protocol.columns(), "test/acc_mean": test, "test/acc_flip_mean": flip,
                "val/acc_best_mean": val.get(label.split("-")[0], ""),
                "time/fit_min_mean": fit, "time/eval_min_mean": evaluation}  # fmt: skip

    plain = Protocol("cifar10", epochs=13, img_size=32, native_size=32)
    sizes = Protocol("cifar10", epochs=20, train_sizes=(16, 24, 32))  # no native size: the sizes still show
    p12 = Protocol("cifar10", epochs=12, img_size=32, native_size=32, train_sizes=(16, 24, 32),
                   size_schedule="progressive", size_epochs=(7, 3, 2))  # fmt: skip
    report = [
        lever("bs256-aaaaaa", plain, "0.6449", "0.6551", "17.0", "0.5"),
        lever("progressive_e20-bbbbbb", sizes, "0.7012", "0.712", "18.25", "0.5"),
        lever("base-cccccc", plain, "0.6549", "", "18.0", "0.75"),
        lever("p12-dddddd", p12, "0.6167", "0.6264", "7.1", "0.2"),
        lever("no_epochs-eeeeee", Protocol("cifar10"), "0.5", "", "1.0", "0.1"),
    ]
    runs = [{"label": "base-cccccc", "params": "137802.0"}, {"label": "bs256-aaaaaa", "params": "137802.0"},
            {"label": "progressive_e20-bbbbbb", "params": "305002.0"},
            {"label": "p12-dddddd", "params": "137802.0"}]  # fmt: skip
    lines = lever_table(report, runs).splitlines()
    assert lines[0] == (
        "| lever | training | params | val acc (%) | test acc (%) | flip TTA (%) | vs base | fit min | eval min "
        "| run min |"
    )
    assert lines[2:] == [  # the reference, then best validation score first (never the test score)
        "| `base` | 13 epochs | 0.14M | 65.0 | 65.5 | - |  | 18.0 | 0.8 | 18.8 |",
        "| `progressive_e20` | 20 epochs at 16-32 px | 0.31M | 70.0 | 70.1 | 71.2 | +4.6 | 18.2 | 0.5 | 18.8 |",
        "| `bs256` | 13 epochs | 0.14M | 66.0 | 64.5 | 65.5 | -1.0 | 17.0 | 0.5 | 17.5 |",  # between printed numbers
        "| `p12` | 12 epochs at 16-32 px (7/3/2) | 0.14M | 62.0 | 61.7 | 62.6 | -3.8 | 7.1 | 0.2 | 7.3 |",
        "| `no_epochs` | - | - | - | 50.0 | - | -15.5 | 1.0 | 0.1 | 1.1 |",  # no validation score: last
    ]
    # the order follows validation, not test: a lever better on test but worse on validation goes below
    swapped = [{**r, "val/acc_best_mean": "0.61"} if r["label"].startswith("bs256") else r for r in report]
    order = [line.split("|")[1].strip() for line in lever_table(swapped, runs).splitlines()[2:]]
    assert order == ["`base`", "`progressive_e20`", "`p12`", "`bs256`", "`no_epochs`"]
    with pytest.raises(ValueError, match="needs a 'base' run"):
        lever_table(report[:2], runs)
    # another reference row (the bf16 levers start from the comparison recipe): first, and named in the header
    lines = lever_table(report, runs, base="p12").splitlines()
    assert "| vs p12 |" in lines[0]
    assert lines[2] == "| `p12` | 12 epochs at 16-32 px (7/3/2) | 0.14M | 62.0 | 61.7 | 62.6 |  | 7.1 | 0.2 | 7.3 |"
    assert lines[3].startswith("| `progressive_e20` |") and "| +8.4 |" in lines[3]


def test_refresh_rewrites_a_stale_block_and_nothing_else(tmp_path):
    (tmp_path / "demo").mkdir()
    with open(tmp_path / "demo" / "report.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=sorted({k for r in REPORT for k in r}))  # protocol columns too
        writer.writeheader()
        writer.writerows(REPORT)
    TABLES["demo/headline"] = ("demo", lambda folder: native_headline(read_csv(folder / "report.csv")))
    try:
        stale = "<!-- generated: demo/headline from x -->\n| stale |\n"
        page = "Intro\n" + stale + "<!-- end generated: demo/headline -->\nEnd\n"
        new = refresh(page, tmp_path)
        assert new.startswith("Intro\n<!-- generated: demo/headline from x -->\n| encoding |")
        assert new.endswith("| 41.0 |\n<!-- end generated: demo/headline -->\nEnd\n")
        assert refresh(new, tmp_path) == new
        with pytest.raises(ValueError, match="demo/headline"):
            refresh(stale, tmp_path)  # no end marker
    finally:
        del TABLES["demo/headline"]
    with pytest.raises(KeyError, match="valid names: extrapolation_native/headline"):
        generate("no/such_table")
