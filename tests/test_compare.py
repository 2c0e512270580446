"""``vitpos.compare`` on real TensorBoard event files written into a temporary runs folder."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from lightning.pytorch.loggers import TensorBoardLogger
from torch.utils.tensorboard import SummaryWriter

from vitpos.compare import compare, main
from vitpos.errors import UserError

# (label, seed) -> final scalars; every run also logs a val/acc curve over 3 epochs
RUNS = {
    ("sincos_2d", 0): {"test/acc": 0.70, "test/loss": 0.9, "test/acc@res48": 0.50, "test/acc@res48/interpolate": 0.55},
    ("sincos_2d", 1): {"test/acc": 0.74, "test/loss": 0.8, "test/acc@res48": 0.52, "test/acc@res48/interpolate": 0.59},
    ("rope_2d", 0): {"test/acc": 0.80, "test/loss": 0.6, "test/acc@res48": 0.75, "test/acc@res64": 0.60},
    ("rope_2d", 3): {"test/acc": 0.78, "test/loss": 0.7, "test/acc@res48": 0.73, "test/acc@res64": 0.64},
}
VAL = {("sincos_2d", 0): [0.3, 0.6, 0.5], ("sincos_2d", 1): [0.4, 0.5, 0.7],
       ("rope_2d", 0): [0.5, 0.7, 0.8], ("rope_2d", 3): [0.5, 0.6, 0.75]}  # fmt: skip


def write_run(folder, val, final=None, epochs=3, hparams=None, loss=None):
    """A run in the layout of Lightning's TensorBoardLogger (version folder = the run folder's name)."""
    logger = TensorBoardLogger(save_dir=str(folder.parent), name="", version=folder.name)
    if hparams is not None:
        logger.log_hyperparams(hparams)
    for epoch, v in enumerate(val[:epochs]):
        step = 100 * (epoch + 1) - 1
        logger.log_metrics({"train/loss": (loss or [1.0 / (epoch + 1)] * 9)[epoch], "epoch": epoch}, step=step)
        logger.log_metrics({"val/acc": v, "val/loss": 1 - v, "epoch": epoch}, step=step)
    if final:
        logger.log_metrics(final, step=100 * epochs)
    logger.finalize("success")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The older layout <task>/<label>/seed<k>, as the committed reports were written."""
    root = tmp_path_factory.mktemp("runs")
    for (label, seed), final in RUNS.items():
        write_run(root / "cifar10" / label / f"seed{seed}", VAL[label, seed], final,
                  hparams={"params": 12_345} if label == "rope_2d" else None)  # fmt: skip
    write_run(root / "cifar10" / "learned_1d" / "seed0", [0.2, 0.3, 0.4], final=None, epochs=2)  # crashed in epoch 2
    # a plain SummaryWriter run with 'params' as a scalar, one seed only
    with SummaryWriter(str(root / "cifar10" / "cpe" / "seed0")) as w:
        for step, (tag, v) in enumerate([("val/acc", 0.6), ("test/acc", 0.66), ("params", 999.0)]):
            w.add_scalar(tag, v, step)
    return root


@pytest.fixture(scope="module")
def report(runs):
    return compare(runs, runs / "out")


def group(report, label):
    return report.groups.set_index("label").loc[label]


def test_means_and_stds_match_what_was_logged(report):
    assert set(report.groups["label"]) == {"sincos_2d", "rope_2d", "cpe"}  # learned_1d is incomplete
    for label in ("sincos_2d", "rope_2d"):
        g = group(report, label)
        assert g["seeds"] == 2
        finals = [RUNS[k] for k in RUNS if k[0] == label]
        for metric in finals[0]:
            values = np.array([f[metric] for f in finals])
            assert g[f"{metric}_mean"] == pytest.approx(values.mean(), abs=1e-6)
            assert g[f"{metric}_std"] == pytest.approx(values.std(ddof=1), abs=1e-6)
        val = np.array([VAL[k] for k in RUNS if k[0] == label])
        assert g["val/acc_best_mean"] == pytest.approx(val.max(1).mean(), abs=1e-6)
        assert g["val/acc_final_mean"] == pytest.approx(val[:, -1].mean(), abs=1e-6)
    assert group(report, "rope_2d")["params_mean"] == 12_345  # from hparams.yaml
    cpe = group(report, "cpe")
    assert (cpe["seeds"], cpe["test/acc_std"], cpe["params_mean"]) == (1, 0.0, 999)  # params as a scalar


def rows_of(md, title):
    """{label cell: line} of the table under the heading ``title``."""
    lines = md.splitlines()
    start = lines.index(title) + 2
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(line)
    return table[0], {line.split("|")[1].strip(): line for line in table[2:]}


def test_markdown_in_percent_with_seed_counts(report, runs):
    md = (runs / "out" / "report.md").read_text()
    assert md == report.report
    header, rows = rows_of(md, "## cifar10")
    assert header.split("|")[1:-1] == [
        " label ",
        " params ",
        " val/acc (best) ",
        " test/acc ",
        " 95% interval ",
        " group ",
    ]
    assert "79.0 ± 1.4 (2)" in rows["`rope_2d`"]  # test/acc: mean 0.79, std sqrt(2e-4) = 0.0141
    assert "66.0 ± — (1)" in rows["`cpe`"] and " one seed " in rows["`cpe`"]  # no interval of its own
    assert "Not distinguishable from the best test/acc (`rope_2d`) at 95%" in md and "Holm" in md
    assert list(rows) == ["`rope_2d`", "`sincos_2d`", "`cpe`"]  # best test/acc first
    assert "`cifar10/learned_1d/seed0`: **incomplete**: no test/acc; last epoch 2" in md  # counted from 1
    assert "acc_vs_length.png not drawn" in md


def test_flip_tta_sits_beside_the_plain_score_when_logged(tmp_path):
    """Flip test-time augmentation is reported beside test/acc, never instead of it."""
    for seed, (plain, flipped) in enumerate([(0.60, 0.62), (0.64, 0.65)]):
        final = {"test/acc": plain, "test/acc_flip": flipped}
        write_run(tmp_path / "cifar10" / "cpe" / f"seed{seed}", [0.5, 0.6, 0.6], final)
    md = compare(tmp_path, tmp_path / "out").report
    header, rows = rows_of(md, "## cifar10")
    assert header.split("|")[1:-1] == [
        " label ", " val/acc (best) ", " test/acc ", " 95% interval ", " group ", " test/acc (flip TTA) "
    ]  # fmt: skip
    cells = rows["`cpe`"].split("|")
    assert (cells[3], cells[6]) == (" 62.0 ± 2.8 (2) ", " 63.5 ± 2.1 (2) ")


def test_one_resolution_table_per_strategy(report, runs):
    md = report.report
    header, rows = rows_of(md, "#### test/acc vs resolution (pixels): each encoding's default strategy")
    assert header.split("|")[1:-1] == [" label ", " 48 ", " 64 "]
    assert rows["`rope_2d`"].split("|")[2:4] == [" 74.0 ± 1.4 (2) ", " 62.0 ± 2.8 (2) "]
    assert rows["`sincos_2d`"].split("|")[2:4] == [" 51.0 ± 1.4 (2) ", "  "]  # no res64 logged
    header, rows = rows_of(md, "#### test/acc vs resolution (pixels): strategy `interpolate`")
    assert header.split("|")[1:-1] == [" label ", " 48 "] and list(rows) == ["`sincos_2d`"]
    assert "57.0 ± 2.8 (2)" in rows["`sincos_2d`"]
    assert max(len(line.split("|")) for line in md.splitlines()) - 2 <= 6  # no 41-column table


def test_outputs_written(report, runs):
    out = runs / "out"
    for name in ("val_acc_curves.png", "acc_vs_resolution.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (out / name).stat().st_size > 10_000
    assert not (out / "acc_vs_length.png").exists()
    csv = (out / "report.csv").read_text().splitlines()
    assert len(csv) == 1 + 3 and "test/acc_mean" in csv[0]
    runs_table = report.runs
    assert len(runs_table) == 6 and runs_table["complete"].sum() == 5
    assert len((out / "runs.csv").read_text().splitlines()) == 1 + 6


def test_cli(runs, tmp_path, capsys):
    assert main([f"runs={runs}", f"out={tmp_path}"]) == 0
    assert "| `rope_2d` |" in capsys.readouterr().out
    assert (tmp_path / "report.md").is_file()
    assert main([f"runs={tmp_path / 'missing'}"]) == 2
    (tmp_path / "empty").mkdir()
    assert main([f"runs={tmp_path / 'empty'}"]) == 2
    assert "no runs under" in capsys.readouterr().err
    with pytest.raises(UserError, match=r"^runs: required \(give runs=DIR"):
        main([f"out={tmp_path}"])
    with pytest.raises(UserError, match=r"expected key=value \(did you mean runs="):
        main([str(runs)])  # the old positional form says how it is written now
    with pytest.raises(UserError, match=r"^--out: expected key=value \(write out=DIR"):
        main([f"runs={runs}", "--out", str(tmp_path)])


def test_cli_multirun_folders_accumulate(runs, tmp_path, monkeypatch):
    import vitpos.compare.summary as summary

    seen = {}

    def fake(runs_dir, out, multirun):
        seen.update(runs=runs_dir, out=out, multirun=multirun)
        raise FileNotFoundError("stop here")

    monkeypatch.setattr(summary, "compare", fake)
    assert main([f"runs={runs}", "multirun=[a/1,a/2]", "multirun=b"]) == 2
    assert seen == {"runs": str(runs), "out": None, "multirun": [Path("a/1"), Path("a/2"), Path("b")]}


CFG = {"data": {"name": "shapes", "num_train": 512}, "trainer": {"max_epochs": 2}, "run": {"group": "shapes"}}


def cfg(model, num_train=512):
    return {**CFG, "data": {**CFG["data"], "num_train": num_train}, "run": {**CFG["run"], "model": model}}


def test_new_layout_at_any_depth_separates_models_and_budgets(tmp_path):
    """runs/<group>/<model>/<label>-<hash>/seed<k>: tables per model and budget, never one mixed row group."""
    base = tmp_path / "runs" / "shapes"
    write_run(base / "vit_micro" / "rope_2d-aaaaaa" / "seed0", [0.5], {"test/acc": 0.5}, 1, {"cfg": cfg("vit_micro")})
    write_run(base / "vit_micro" / "rope_2d-aaaaaa" / "seed1", [0.5], {"test/acc": 0.7}, 1, {"cfg": cfg("vit_micro")})
    write_run(base / "vit_tiny" / "rope_2d-bbbbbb" / "seed0", [0.5], {"test/acc": 0.9}, 1, {"cfg": cfg("vit_tiny")})
    write_run(base / "vit_micro" / "rope_2d-cccccc" / "seed0", [0.5], {"test/acc": 0.2}, 1,
              {"cfg": cfg("vit_micro", 64)})  # fmt: skip
    result = compare(tmp_path / "runs", tmp_path / "report")
    groups = result.groups
    got = {(g["model"], g["budget"], g["label"]): (g["seeds"], round(g["test/acc_mean"], 4))
           for _, g in groups.iterrows()}  # fmt: skip
    assert got == {
        ("vit_micro", "shapes, 512 train × 2 epochs", "rope_2d-aaaaaa"): (2, 0.6),
        ("vit_tiny", "shapes, 512 train × 2 epochs", "rope_2d-bbbbbb"): (1, 0.9),
        ("vit_micro", "shapes, 64 train × 2 epochs", "rope_2d-cccccc"): (1, 0.2),
    }
    # the protocol as columns of both tables, for code that selects on it; the CSVs keep their layout
    assert {(r["label"], r["train_images"], r["epochs"]) for _, r in groups.iterrows()} == {
        ("rope_2d-aaaaaa", 512, 2), ("rope_2d-bbbbbb", 512, 2), ("rope_2d-cccccc", 64, 2)}  # fmt: skip
    assert list(result.runs["train_images"]).count(512) == 3
    for name in ("report.csv", "runs.csv"):
        header = (tmp_path / "report" / name).read_text().splitlines()[0].split(",")
        assert "budget" in header and "epochs" not in header and "train_images" not in header
    md = result.report
    for title in ("## shapes · model `vit_micro` · shapes, 512 train × 2 epochs",
                  "## shapes · model `vit_tiny` · shapes, 512 train × 2 epochs",
                  "## shapes · model `vit_micro` · shapes, 64 train × 2 epochs"):  # fmt: skip
        header, rows = rows_of(md, title)
        assert list(rows) == ["`rope_2d`"]  # the config hash is dropped where the label stays unique
    # the same runs seen from the group's folder: same groups
    again = compare(base, tmp_path / "report2").groups
    assert sorted(again["label"]) == sorted(groups["label"]) and set(again["task"]) == {"shapes"}


def test_diverged_runs_are_listed_as_diverged_and_left_out_of_the_means(tmp_path):
    base = tmp_path / "shapes" / "vit_micro"
    write_run(base / "rope_2d-aaaaaa" / "seed0", [0.5, 0.6], {"test/acc": 0.6}, 2)
    write_run(base / "rope_2d-aaaaaa" / "seed1", [0.3, 0.26], {"test/acc": 0.26}, 2, loss=[1.2, math.nan])
    (base / "alibi-bbbbbb" / "seed0").mkdir(parents=True)  # the divergence guard's record, no event files
    (base / "alibi-bbbbbb" / "seed0" / "metrics.json").write_text(
        json.dumps({"status": "diverged", "reason": "non-finite loss at step 3: lower optim.lr", "metrics": {}})
    )
    (base / "sincos_2d-cccccc" / "seed0").mkdir(parents=True)  # killed before anything was logged
    result = compare(tmp_path, tmp_path / "report")
    groups = result.groups
    g = groups.set_index("label").loc["rope_2d-aaaaaa"]
    assert (g["seeds"], g["test/acc_mean"]) == (1, pytest.approx(0.6))  # the NaN seed is not averaged in
    status = dict(zip(result.runs["path"], result.runs["status"]))
    assert status == {
        "shapes/vit_micro/rope_2d-aaaaaa/seed0": "complete",
        "shapes/vit_micro/rope_2d-aaaaaa/seed1": "diverged",
        "shapes/vit_micro/alibi-bbbbbb/seed0": "diverged",
        "shapes/vit_micro/sincos_2d-cccccc/seed0": "failed",
    }
    md = result.report
    assert "`shapes/vit_micro/rope_2d-aaaaaa/seed1`: **diverged**: diverged: train/loss non-finite from step 199" in md
    assert "**diverged**: diverged: non-finite loss at step 3: lower optim.lr" in md


def test_multirun_jobs_failed_before_their_run_folder_are_listed(tmp_path):
    """A Hydra job folder with a log holding an error, and one with no log at all: both listed, never dropped."""
    write_run(tmp_path / "runs" / "shapes" / "rope_2d" / "seed0", [0.5], {"test/acc": 0.5}, 1)
    sweep = tmp_path / "multirun" / "2026-01-01" / "10-00-00"
    for n, overrides, log in [
        (0, ["encoding=rope_2d"], "[2026-01-01 10:00:01,000][HYDRA] starting\n"),
        (1, ["encoding=alibi"], "[2026-01-01 10:00:02,000][__main__][ERROR] - error: encoding: 'alibi' is "
                                "for sequences; use an image encoding\n"),
    ]:  # fmt: skip
        (sweep / str(n) / ".hydra").mkdir(parents=True)
        (sweep / str(n) / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
        (sweep / str(n) / "train.log").write_text(log)
    result = compare(tmp_path / "runs", tmp_path / "report", multirun=[tmp_path / "multirun"])
    failed = {j.path.name: j.error for j in result.jobs if j.error}
    assert failed["1"] == "error: encoding: 'alibi' is for sequences; use an image encoding"
    assert "0" in failed  # no config to locate its run folder and no error logged: not taken as a success
    md = result.report
    assert "2 jobs, 2 failed:" in md and "(`encoding=alibi`): error: encoding: 'alibi' is for sequences" in md


def test_multirun_folder_as_runs_dir_reports_its_jobs_runs(tmp_path):
    """Jobs saved by Hydra (.hydra/config.yaml): one that ran is linked to its run folder (and that run is
    reported), one whose config is refused is failed with the config check's message."""
    from conftest import CONFIGS
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from vitpos.run.identity import run_dir

    sweep = tmp_path / "multirun" / "2026-01-01" / "10-00-00"
    for n, encoding in enumerate(["rope_2d", "rope_2d encoding.strategy=bogus"]):
        overrides = ["data=shapes", "model=vit_micro", f"run.root={tmp_path / 'runs'}", *f"encoding={encoding}".split()]
        with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
            cfg = compose("train", overrides=overrides)
        (sweep / str(n) / ".hydra").mkdir(parents=True)
        OmegaConf.save(cfg, sweep / str(n) / ".hydra" / "config.yaml")
        choices = {"hydra": {"runtime": {"choices": {"model": "vit_micro"}}}}
        OmegaConf.save(choices, sweep / str(n) / ".hydra" / "hydra.yaml")
        (sweep / str(n) / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
        if n == 0:
            OmegaConf.update(cfg, "run.model", "vit_micro", force_add=True)
            write_run(run_dir(cfg), [0.5], {"test/acc": 0.55}, 1)
    result = compare(tmp_path / "multirun", tmp_path / "report")
    groups = result.groups
    jobs = {j.path.name: j for j in result.jobs}
    assert jobs["0"].error is None and jobs["0"].run is not None
    assert "encoding.strategy" in jobs["1"].error and "bogus" in jobs["1"].error and jobs["1"].run is None
    assert list(groups["test/acc_mean"]) == [pytest.approx(0.55)]  # the job's run, found through its config
    assert "None: the one run is complete. 1 sweep job failed before its run folder existed" in result.report
    assert "2 jobs, 1 failed:" in result.report


def test_a_finished_job_is_known_by_the_folder_it_wrote_not_by_todays_code(tmp_path):
    """A sweep job of a plug-in whose file was edited after the sweep: its config now maps to another
    folder, but ``outcome.txt`` names the one it trained in, so the job is finished, not failed."""
    from conftest import compose_train
    from omegaconf import OmegaConf

    from vitpos.run.identity import run_dir

    enc = tmp_path / "my_enc.py"
    enc.write_text("X = 1\n")
    overrides = ["data=shapes", "model=vit_micro", "encoding=plugin", f"encoding.module={enc}", "encoding.name=mine",
                 f"run.root={tmp_path / 'runs'}"]  # fmt: skip
    cfg = compose_train(*overrides)
    OmegaConf.update(cfg, "run.model", "vit_micro", force_add=True)
    folder = run_dir(cfg)
    write_run(folder, [0.5], {"test/acc": 0.55}, 1)
    job = tmp_path / "multirun" / "0"
    (job / ".hydra").mkdir(parents=True)
    OmegaConf.save(cfg, job / ".hydra" / "config.yaml")
    (job / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    (job / "outcome.txt").write_text(f"test/acc 0.5500 ({folder})\n")
    enc.write_text("X = 2\n")  # edited after the sweep: today's folder differs
    assert run_dir(cfg) != folder
    result = compare(tmp_path / "multirun", tmp_path / "report")
    (found,) = result.jobs
    assert found.error is None and found.run == folder, found
    assert "1 failed" not in result.report


def test_stray_event_files_higher_up_are_a_run_and_hide_nothing(tmp_path):
    """Event files at runs/<group>/ are listed as a run of their own; the runs below them still count."""
    write_run(tmp_path / "shapes" / "rope_2d" / "seed0", [0.5], {"test/acc": 0.5}, 1)
    write_run(tmp_path / "shapes" / "rope_2d" / "seed0" / "version_1", [0.6], None, 1)  # belongs to seed0
    with SummaryWriter(str(tmp_path / "shapes")) as w:
        w.add_scalar("val/acc", 0.3, 0)
    result = compare(tmp_path, tmp_path / "report")
    runs = result.runs.set_index("path")
    assert sorted(runs.index) == ["shapes", "shapes/rope_2d/seed0"]
    assert runs.loc["shapes", "status"] == "incomplete"  # its own val/acc only, not the run below
    assert runs.loc["shapes/rope_2d/seed0", "status"] == "complete"
    assert runs.loc["shapes/rope_2d/seed0", "val/acc_best"] == pytest.approx(0.6)  # version_1 read with it


def test_the_budget_names_the_resolution_protocol_and_a_progressive_schedule():
    """Runs that train differently never share a budget (a report section): the train size against
    the native one, sizes per batch (random) against progressive runs of epochs, and their split.
    The sentence is made from the protocol's columns, which survive a CSV round trip unchanged."""
    from vitpos.compare.protocol import Protocol

    def budget(**data):
        cfg = {"data": {"name": "cifar10", "native_size": 32, "img_size": 32, **data},
               "trainer": {"max_epochs": 12, "precision": "bf16-mixed"}}  # fmt: skip
        protocol = Protocol.of_config(cfg)
        as_csv = {k: "" if v is None else str(v) for k, v in protocol.columns().items()}
        assert Protocol.from_columns(protocol.columns()) == Protocol.from_columns(as_csv) == protocol
        return protocol.budget()

    assert Protocol.of_config(None) is None and Protocol.of_config({}) is None  # no saved config: no protocol
    assert Protocol.of_config({"data": {"name": "shapes", "num_train": 512}}).budget() == "shapes, 512 train"
    columns = Protocol.of_config({"data": {"train_sizes": [16, 32], "size_epochs": [3, 1]},
                                  "trainer": {"max_epochs": 4, "precision": "32"}}).columns()  # fmt: skip
    assert (columns["train_sizes"], columns["size_epochs"], columns["epochs"], columns["precision"]) == (
        "16/32", "3/1", 4, "32")  # fmt: skip

    # the images that trained, the validation split held out of them, the epochs in the right number
    shapes = {"data": {"name": "shapes", "num_train": 20000, "val_size": 2000}, "trainer": {"max_epochs": 1}}
    assert Protocol.of_config(shapes).budget() == "shapes, 18,000 train (2,000 val) × 1 epoch"
    shapes["data"]["train_subset"] = 6000
    assert Protocol.of_config(shapes).budget() == "shapes, 6,000 train (2,000 val) × 1 epoch"
    assert budget(val_size=5000) == "cifar10, full train set (5,000 val) × 12 epochs"
    assert budget(val_size=5000, train_subset=6000, num_train=20000) == "cifar10, 6,000 train (5,000 val) × 12 epochs"
    sequence = {"data": {"name": "seq_copy", "num_train": 8000, "num_val": 1000}, "trainer": {"max_epochs": 5}}
    assert Protocol.of_config(sequence).budget() == "seq_copy, 8,000 train (1,000 val) × 5 epochs"  # val on top
    shapes["trainer"] |= {"limit_train_batches": 2, "limit_val_batches": 1.0, "limit_test_batches": 1}
    limited = Protocol.of_config(shapes)  # part of those images only: said, and a section of its own
    assert limited.budget() == "shapes, 6,000 train (2,000 val) × 1 epoch, limit_train_batches=2, limit_test_batches=1"
    assert Protocol.from_columns({k: "" if v is None else str(v) for k, v in limited.columns().items()}) == limited

    sizes = {"train_sizes": [16, 24, 32]}
    assert budget() == "cifar10, full train set × 12 epochs"
    assert budget(img_size=16) == "cifar10, full train set × 12 epochs, trained at 16 px (native 32)"
    assert budget(**sizes) == "cifar10, full train set × 12 epochs, trained at 16-32 px (native 32)"
    assert budget(**sizes, size_schedule="progressive") == (
        "cifar10, full train set × 12 epochs, trained at 16-32 px, progressive (native 32)"
    )
    assert budget(**sizes, size_schedule="progressive", size_epochs=[7, 3, 2]) == (
        "cifar10, full train set × 12 epochs, trained at 16-32 px, progressive 7/3/2 (native 32)"
    )


def test_each_protocol_gets_its_own_plot_panel_and_upsampled_sizes_are_marked(tmp_path, monkeypatch):
    """Two budgets of one task (train at 16 px vs 16-32 px) never share axes (their numbers are
    not comparable), lines are named by label alone, and a size above native is marked upsampled."""
    from matplotlib.figure import Figure

    from vitpos.compare.plots import plot_extrapolation
    from vitpos.compare.report import section_title

    single, multi = "cifar10 × 13 epochs, trained at 16 px (native 32)", "cifar10 × 9 epochs, trained at 16-32 px"
    groups = pd.DataFrame(
        [
            {"task": "g", "model": "m", "budget": single, "label": "rope_2d-0a1b2c",
             "test/acc@res32_mean": 0.5, "test/acc@res32_std": 0.01, "test/acc@res64up_mean": 0.3,
             "test/acc@res64up_std": 0.0},
            {"task": "g", "model": "m", "budget": multi, "label": "rope_2d-99aa00",
             "test/acc@res32_mean": 0.6, "test/acc@res32_std": 0.0, "test/acc@res64up_mean": np.nan,
             "test/acc@res64up_std": np.nan},
        ]
    )  # fmt: skip
    drawn = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, path, **kw: drawn.append(fig))  # keep the figure
    titles = plot_extrapolation(groups, "res", tmp_path / "acc.png")
    assert titles == [section_title("g", "m", single, plain=True), section_title("g", "m", multi, plain=True)]
    assert titles[0] == f"g · model m\n{single}"
    (figure,) = drawn
    first, second = figure.axes
    assert [t.get_text() for t in first.get_legend().get_texts()] == ["rope_2d"]  # no hash, no budget
    assert [t.get_text() for t in first.get_xticklabels()] == ["32", "64\n(upsampled)"]
    assert [t.get_text() for t in second.get_xticklabels()] == ["32"]
    assert plot_extrapolation(groups, "len", tmp_path / "len.png") == []  # nothing logged: no plot


# the sizes python train.py data=shapes evaluates by default (0.5-2x its 32 px) and the two of 16x32 px
SHAPES_SIZES = {"16": 0.40, "24": 0.60, "32": 0.70, "40": 0.60, "48": 0.50, "64": 0.40, "16x32": 0.55, "32x16": 0.52}


@pytest.fixture(scope="module")
def shapes_report(tmp_path_factory):
    """Three runs of ``python train.py data=shapes model=vit_micro trainer.max_epochs=1`` (two
    seeds of rope_2d, one of sincos_2d), each with its saved config and the accuracies beyond 32 px;
    the report of them, its resolution figure kept (not only saved)."""
    from matplotlib.figure import Figure

    root = tmp_path_factory.mktemp("shapes_runs")
    cfg = {"data": {"name": "shapes", "num_train": 20000, "val_size": 2000, "img_size": 32},
           "trainer": {"max_epochs": 1}, "run": {"group": "shapes", "model": "vit_micro"}}  # fmt: skip
    for label, seed, shift in (("rope_2d-aaaaaa", 0, 0.0), ("rope_2d-aaaaaa", 1, 0.02), ("sincos_2d-bbbbbb", 0, -0.1)):
        final = {"test/acc": 0.7 + shift, **{f"test/acc@res{s}": a + shift for s, a in SHAPES_SIZES.items()}}
        write_run(root / "shapes" / "vit_micro" / label / f"seed{seed}", [0.6], final, 1, {"cfg": cfg})
    drawn, save = {}, Figure.savefig

    def keep(fig, path, **kw):
        drawn[Path(path).name] = fig
        save(fig, path, **kw)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Figure, "savefig", keep)
        result = compare(root, root / "report")
    return result, drawn["acc_vs_resolution.png"]


def test_the_report_says_what_trained_and_counts_in_words(shapes_report):
    """20,000 shapes are generated and 2,000 of them validate: the budget says the 18,000 that
    trained, the 2,000 that validated and "1 epoch"; every count agrees with its noun."""
    md = shapes_report[0].report
    assert "## shapes · model `vit_micro` · shapes, 18,000 train (2,000 val) × 1 epoch\n" in md
    assert "20,000" not in md
    assert not re.search(r"\b1 (epochs|runs|seeds|jobs|degrees)\b", md), md
    # one degree of freedom resolves nothing, and the report says why
    assert "Nothing is resolved at 95%: the seed spread rests on 1 degree of freedom" in md
    assert "None: all 3 runs are complete." in md


def test_report_columns_hold_the_squares_first_then_wide_before_tall(shapes_report):
    result, _ = shapes_report
    order = ["16", "24", "32", "40", "48", "64", "16x32", "32x16"]
    header, rows = rows_of(result.report, "#### test/acc vs resolution (pixels): each encoding's default strategy")
    assert header == "| label | " + " | ".join(order) + " |"
    assert list(rows) == ["`rope_2d`", "`sincos_2d`"]
    csv = (result.out / "report.csv").read_text().splitlines()[0].split(",")
    assert [c.removeprefix("test/acc@res").removesuffix("_mean") for c in csv if c.startswith("test/acc@res")
            and c.endswith("_mean")] == order  # fmt: skip


def test_the_resolution_plot_has_a_title_ticks_at_the_tested_sizes_and_explains_its_markers(shapes_report):
    """Ticks at the tested sizes and nowhere else: the squares' names on the first row, the
    non-square ones' (16x32 and 32x16 share sqrt(512) = 22.6) on a row below, so that none prints
    over its neighbour (``24``); the triangles of the non-square sizes are named in the legend."""
    import itertools

    from vitpos.compare.plots import SHAPE_LEGEND

    _, figure = shapes_report
    assert figure._suptitle.get_text() == "test accuracy vs resolution (pixels): mean ± std over seeds"
    (ax,) = figure.axes
    assert ax.get_title() == "shapes · model vit_micro\nshapes, 18,000 train (2,000 val) × 1 epoch"
    assert list(ax.get_xticks()) == [16, 24, 32, 40, 48, 64] and list(ax.get_xticks(minor=True)) == [
        pytest.approx(512**0.5)]  # fmt: skip
    names = [t.get_text() for t in ax.get_xticklabels()], [t.get_text() for t in ax.get_xticklabels(minor=True)]
    assert names == (["16", "24", "32", "40", "48", "64"], ["16x32\n32x16"])
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    labels = ax.get_xticklabels() + ax.get_xticklabels(minor=True)
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in labels]
    assert not [(a, b) for (a, box), (b, other) in itertools.combinations(boxes, 2) if box.overlaps(other)]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["rope_2d", "sincos_2d", SHAPE_LEGEND["wide"], SHAPE_LEGEND["tall"]]
