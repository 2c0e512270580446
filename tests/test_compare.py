"""``vitpos.compare`` on real TensorBoard event files written into a temporary runs folder."""

from __future__ import annotations

import numpy as np
import pytest
from lightning.pytorch.loggers import TensorBoardLogger
from torch.utils.tensorboard import SummaryWriter

from vitpos.compare import compare, main

# (label, seed) -> final scalars; every run also logs a val/acc curve over 3 epochs
RUNS = {
    ("sincos_2d", 0): {"test/acc": 0.70, "test/loss": 0.9, "test/acc@res48": 0.50, "test/acc@res48/interpolate": 0.55},
    ("sincos_2d", 1): {"test/acc": 0.74, "test/loss": 0.8, "test/acc@res48": 0.52, "test/acc@res48/interpolate": 0.59},
    ("rope_2d", 0): {"test/acc": 0.80, "test/loss": 0.6, "test/acc@res48": 0.75, "test/acc@res64": 0.60},
    ("rope_2d", 3): {"test/acc": 0.78, "test/loss": 0.7, "test/acc@res48": 0.73, "test/acc@res64": 0.64},
}
VAL = {("sincos_2d", 0): [0.3, 0.6, 0.5], ("sincos_2d", 1): [0.4, 0.5, 0.7],
       ("rope_2d", 0): [0.5, 0.7, 0.8], ("rope_2d", 3): [0.5, 0.6, 0.75]}  # fmt: skip


def write_run(root, label, seed, val, final=None, epochs=3, params=None):
    """A run in the layout of Lightning's TensorBoardLogger (version folder = seed<k>)."""
    logger = TensorBoardLogger(save_dir=str(root / "cifar10" / label), name="", version=f"seed{seed}")
    if params is not None:
        logger.log_hyperparams({"cfg": {"model": {"dim": 64}}, "params": params})
    for epoch, v in enumerate(val[:epochs]):
        step = 100 * (epoch + 1) - 1
        logger.log_metrics({"train/loss": 1.0 / (epoch + 1), "epoch": epoch}, step=step)
        logger.log_metrics({"val/acc": v, "val/loss": 1 - v, "epoch": epoch}, step=step)
    if final:
        logger.log_metrics(final, step=100 * epochs)
    logger.finalize("success")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    for (label, seed), final in RUNS.items():
        write_run(root, label, seed, VAL[label, seed], final, params=12_345 if label == "rope_2d" else None)
    write_run(root, "learned_1d", 0, [0.2, 0.3, 0.4], final=None, epochs=2)  # crashed in epoch 2
    # a plain SummaryWriter run with 'params' as a scalar, one seed only
    with SummaryWriter(str(root / "cifar10" / "cpe" / "seed0")) as w:
        for step, (tag, v) in enumerate([("val/acc", 0.6), ("test/acc", 0.66), ("params", 999.0)]):
            w.add_scalar(tag, v, step)
    with SummaryWriter(str(root / "cifar10" / "stray")) as w:  # not a seed folder: reported, not read
        w.add_scalar("test/acc", 0.1, 0)
    return root


@pytest.fixture(scope="module")
def report(runs):
    return compare(runs, runs / "out")


def group(report, label):
    return report.set_index("label").loc[label]


def test_means_and_stds_match_what_was_logged(report):
    assert set(report["label"]) == {"sincos_2d", "rope_2d", "cpe"}  # learned_1d is incomplete
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


def test_markdown_table_and_incomplete_runs(report, runs):
    md = (runs / "out" / "report.md").read_text()
    assert md == report.attrs["report"]
    rows = {line.split("|")[1].strip(): line for line in md.splitlines() if line.startswith("| `")}
    assert "0.7900 ± 0.0141" in rows["`rope_2d`"]  # test/acc: mean 0.79, std sqrt(2e-4)
    assert "0.6200 ± 0.0283" in rows["`rope_2d`"]  # acc@res64
    assert "0.5700 ± 0.0283" in rows["`sincos_2d`"]  # acc@res48/interpolate
    assert "0.6600 ± —" in rows["`cpe`"]
    header = md.splitlines()[md.splitlines().index("## cifar10") + 2]
    assert header.split("|")[1:-1] == [
        " label ", " seeds ", " params ", " val/acc (best) ", " test/acc ",
        " acc@res48 ", " acc@res48/interpolate ", " acc@res64 ",
    ]  # fmt: skip
    assert list(rows) == ["`rope_2d`", "`sincos_2d`", "`cpe`"]  # best test/acc first
    assert "`cifar10/learned_1d/seed0`: no test/acc; last epoch 1" in md
    assert "acc_vs_length.png not drawn" in md
    assert "Ignored event files outside the <task>/<label>/seed<k>/ layout: `cifar10/stray`" in md


def test_outputs_written(report, runs):
    out = runs / "out"
    for name in ("val_acc_curves.png", "acc_vs_resolution.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (out / name).stat().st_size > 10_000
    assert not (out / "acc_vs_length.png").exists()
    csv = (out / "report.csv").read_text().splitlines()
    assert len(csv) == 1 + 3 and "test/acc_mean" in csv[0]
    runs_table = report.attrs["runs"]
    assert len(runs_table) == 6 and runs_table["complete"].sum() == 5


def test_cli(runs, tmp_path, capsys):
    assert main([str(runs), "--out", str(tmp_path)]) == 0
    assert "| `rope_2d` |" in capsys.readouterr().out
    assert main([str(tmp_path / "empty")]) == 2
