"""``python -m vitpos.benchmark``: one command scores an encoding against committed results,
tested end to end at a tiny scale on the real CIFAR-10 copy: a committed snapshot made the way the
real ones are, a plug-in scored beside it, a rerun that trains nothing, an interrupted run that
resumes, and the cross-precision case answered in one line."""

from __future__ import annotations

import pytest
import yaml
from conftest import ROOT, require_cifar, run_command

from scripts.snapshot_runs import snapshot

EXAMPLE = ROOT / "docs" / "examples" / "my_enc.py"


def tiny_list(cifar) -> list[str]:
    return [f"data.root={cifar}", "trainer.max_epochs=1", "+trainer.limit_train_batches=2",
            "+trainer.limit_val_batches=1", "data.train_subset=512", "data.test_subset=256", "eval.test_subset=128",
            "model.compile=false"]  # fmt: skip


def tiny(cifar) -> str:
    return "overrides=[" + ",".join(tiny_list(cifar)) + "]"


def committed_aspect(tmp_path, cifar, encodings: list[str], seeds: int):
    """``results`` holding an aspect report of ``encodings`` × ``seeds`` tiny runs, trained by
    ``train.py`` as the committed ones were and snapshotted the same way."""
    for name in encodings:
        for seed in range(seeds):
            ran = run_command("train.py", "experiment=extrapolation_aspect", f"encoding={name}", f"seed={seed}",
                              f"run.root={tmp_path / 'base'}", *tiny_list(cifar), cwd=tmp_path)  # fmt: skip
            assert ran.code == 0, ran.out[-2000:] + ran.err[-2000:]
    results = tmp_path / "results"
    runs = snapshot(tmp_path / "base" / "extrapolation_aspect", results / "extrapolation_aspect" / "runs")
    assert runs == len(encodings) * seeds
    return results


@pytest.mark.slow
def test_a_plugin_is_scored_beside_a_committed_baseline_and_resumes(tmp_path):
    cifar = require_cifar()
    results = committed_aspect(tmp_path, cifar, ["none", "rope_2d"], seeds=2)
    # scored again once its runs are committed: read, not trained, and one row, not a copy clash
    rescored = run_command("vitpos.benchmark", "encoding=none", "protocols=[aspect]", "seeds=2", f"out={tmp_path}/base",
                           f"results={results}", tiny(cifar), cwd=tmp_path)  # fmt: skip
    assert rescored.code == 0 and rescored.out.count("finished earlier") == 2, rescored.out[-2000:] + rescored.err
    assert "against 2 committed runs" in rescored.out  # rope_2d's: its own are scored anew
    report = (tmp_path / "base" / "aspect" / "report" / "report.md").read_text()
    assert report.count("| `none` |") == report.count("| `rope_2d` |") > 0  # one row per table each

    args = ["encoding=scaled_sincos", f"module={EXAMPLE}", "protocols=[aspect]", "seeds=2", f"out={tmp_path}/out",
            f"results={results}", tiny(cifar)]  # fmt: skip
    ran = run_command("vitpos.benchmark", *args, cwd=tmp_path)
    assert ran.code == 0, ran.out[-2000:] + ran.err[-2000:]
    assert "plan:\n  aspect: 2 runs (scaled_sincos; seeds 0, 1, " in ran.out and "against 4 committed runs" in ran.out
    assert "[aspect 2/2] scaled_sincos seed 1: test/acc" in ran.out
    verdict = (tmp_path / "out" / "aspect" / "verdict.txt").read_text().strip()
    assert verdict.startswith("aspect: test/acc ") and "(2 seeds: 0, 1)" in verdict, verdict
    assert "primary, against rope_2d and none (Holm over 2)" in verdict and ran.out.strip().endswith(verdict)
    report = (tmp_path / "out" / "aspect" / "report" / "report.md").read_text()
    assert "| `none` |" in report and "| `scaled_sincos` |" in report and "Holm" in report

    again = run_command("vitpos.benchmark", *args, cwd=tmp_path)  # a rerun reads, trains nothing
    assert again.code == 0 and again.out.count("finished earlier") == 2, again.out[-2000:]
    (status,) = [
        p for p in (tmp_path / "out" / "extrapolation_aspect").rglob("metrics.json") if p.parent.name == "seed1"
    ]
    status.unlink()  # interrupted after its last checkpoint, before it was tested
    resumed = run_command("vitpos.benchmark", *args, cwd=tmp_path)
    assert resumed.code == 0 and resumed.out.count("finished earlier") == 1, resumed.out[-2000:]
    assert status.exists() and resumed.out.strip().endswith(verdict)


@pytest.mark.slow
def test_another_precision_is_answered_in_one_line(tmp_path):
    cifar = require_cifar()
    results = committed_aspect(tmp_path, cifar, ["none"], seeds=1)
    (hparams,) = results.rglob("hparams.yaml")
    saved = yaml.safe_load(hparams.read_text())
    here = saved["cfg"]["run"]["precision"]
    saved["cfg"]["run"]["precision"] = "32-true" if here == "bf16-mixed" else "bf16-mixed"  # the other kind's
    hparams.write_text(yaml.safe_dump(saved, sort_keys=False))
    args = [
        "encoding=rope_2d",
        "protocols=[aspect]",
        "seeds=1",
        f"out={tmp_path}/out",
        f"results={results}",
        tiny(cifar),
    ]
    refused = run_command("vitpos.benchmark", *args, "baselines=[]", cwd=tmp_path)
    assert refused.code == 2 and refused.err.strip().startswith(f"error: baselines: this machine trains in {here}")
    assert len(refused.err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
    anchored = run_command("vitpos.benchmark", *args, "baselines=[none]", cwd=tmp_path)
    assert anchored.code == 0, anchored.err[-2000:]
    assert f"note: aspect: this machine trains in {here}" in anchored.out and "against 0 committed runs" in anchored.out
    assert "[aspect 2/2] none seed 0" in anchored.out  # the anchor, retrained here
