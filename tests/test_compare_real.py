"""The comparison report on runs from real (short) trainings."""

import math

import pytest
from conftest import CONFIGS
from hydra import compose, initialize_config_dir
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from vitpos.compare import compare, main
from vitpos.run.identity import next_commands
from vitpos.train import train

TINY = [
    "data=shapes", "data.num_train=400", "data.num_test=96", "data.val_size=96", "model=vit_micro",
    "trainer.max_epochs=2", "eval.resolutions=[24,32]", "task.pictures=false", "trainer.enable_progress_bar=false",
]  # fmt: skip


def last_scalar(run_dir, tag):
    values = []
    for events in sorted(run_dir.glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
        acc.Reload()
        if tag in acc.Tags()["scalars"]:
            values = acc.Scalars(tag)
    return values[-1].value if values else None


@pytest.mark.slow
def test_report_matches_the_event_files_and_averages_seeds(tmp_path):
    returned = {}
    for name in ("rope_2d", "learned_1d"):
        for seed in (0, 1):
            with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
                cfg = compose("train", overrides=[f"run.root={tmp_path}", f"encoding={name}", f"seed={seed}", *TINY])
            returned[(name, seed)] = train(cfg)
    # one more run, interrupted before testing: it must be listed, not dropped
    (tmp_path / "shapes" / "cpe" / "seed0").mkdir(parents=True)
    groups = compare(tmp_path, tmp_path / "report").groups
    groups["name"] = groups["label"].str.replace(r"-[0-9a-f]{6}$", "", regex=True)  # the config hash, if any
    assert set(groups["name"]) == {"rope_2d", "learned_1d"}
    for name in ("rope_2d", "learned_1d"):
        g = groups[groups["name"] == name].iloc[0]
        assert g["seeds"] == 2
        for tag in ("test/acc", "test/acc@res24"):
            folders = [next(p for p in tmp_path.rglob(f"seed{s}") if name in str(p)) for s in (0, 1)]
            values = [returned[(name, s)][tag] for s in (0, 1)]  # what train() returned and metrics.json holds
            # not TensorBoard scalars (final numbers are TEXT tables there): compare reads metrics.json
            assert all(last_scalar(folder, tag) is None for folder in folders)
            mean = sum(values) / 2
            std = math.sqrt(sum((v - mean) ** 2 for v in values))  # ddof=1 with two seeds
            assert g[f"{tag}_mean"] == pytest.approx(mean, abs=1e-6)
            assert g[f"{tag}_std"] == pytest.approx(std, abs=1e-6)
        # the parameter count, which the README headline subtracts from none's, comes from metrics.json
        assert g["params_mean"] == returned[(name, 0)]["params"] > 0
    report = (tmp_path / "report" / "report.md").read_text()
    assert "`shapes/cpe/seed0`: **failed**" in report and "rope_2d" in report
    assert f"{100 * groups[groups['name'] == 'rope_2d'].iloc[0]['test/acc_mean']:.1f} ± " in report
    assert (tmp_path / "report" / "acc_vs_resolution.png").exists()
    # the compare command a finished run prints runs as printed (key=value; no positional folder)
    folder = next(p for p in tmp_path.rglob("seed0") if "rope_2d" in str(p))
    (line,) = [x.split() for x in next_commands(folder, "classification").splitlines() if "vitpos.compare" in x]
    assert line[:3] == ["python", "-m", "vitpos.compare"] and line[3].startswith("runs=")
    assert main(line[3:]) == 0
    assert (tmp_path / "shapes" / "report" / "report.md").read_text().count("rope_2d") >= 1
