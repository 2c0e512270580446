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


def tiny(cifar) -> str:
    return ("overrides=[" + ",".join([f"data.root={cifar}", "trainer.max_epochs=1", "+trainer.limit_train_batches=2",
            "+trainer.limit_val_batches=1", "data.train_subset=512", "data.test_subset=256", "eval.test_subset=128",
            "model.compile=false"]) + "]")  # fmt: skip


@pytest.mark.slow
def test_a_plugin_is_scored_beside_a_committed_baseline_and_resumes(tmp_path):
    cifar = require_cifar()
    base = run_command("vitpos.benchmark", "encoding=none", "protocols=[aspect]", "seeds=2", f"out={tmp_path}/base",
                       f"results={tmp_path}/nothing", tiny(cifar), cwd=tmp_path)  # fmt: skip
    assert base.code == 0, base.out[-2000:] + base.err[-2000:]
    results = tmp_path / "results"
    assert snapshot(tmp_path / "base" / "extrapolation_aspect", results / "extrapolation_aspect" / "runs") == 2
    # scored again once its runs are committed: read, not trained, and one row, not a copy clash
    rows = (tmp_path / "base" / "aspect" / "report" / "report.md").read_text().count("| `none` |")
    rescored = run_command("vitpos.benchmark", "encoding=none", "protocols=[aspect]", "seeds=2", f"out={tmp_path}/base",
                           f"results={results}", tiny(cifar), cwd=tmp_path)  # fmt: skip
    assert rescored.code == 0 and rescored.out.count("finished earlier") == 2, rescored.out[-2000:] + rescored.err
    assert (tmp_path / "base" / "aspect" / "report" / "report.md").read_text().count("| `none` |") == rows

    args = ["encoding=scaled_sincos", f"module={EXAMPLE}", "protocols=[aspect]", "seeds=2", f"out={tmp_path}/out",
            f"results={results}", tiny(cifar)]  # fmt: skip
    ran = run_command("vitpos.benchmark", *args, cwd=tmp_path)
    assert ran.code == 0, ran.out[-2000:] + ran.err[-2000:]
    assert "plan:\n  aspect: 2 runs (scaled_sincos; " in ran.out and "against 2 committed runs" in ran.out
    assert "[aspect 2/2] scaled_sincos seed 1: test/acc" in ran.out
    line = ran.out.strip().splitlines()[-1]
    assert line.startswith("aspect: test/acc ") and "(2 seeds), 95% interval" in line, line
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
    assert status.exists() and line == resumed.out.strip().splitlines()[-1]


@pytest.mark.slow
def test_another_precision_is_answered_in_one_line(tmp_path):
    cifar = require_cifar()
    base = run_command("vitpos.benchmark", "encoding=none", "protocols=[aspect]", "seeds=1", f"out={tmp_path}/base",
                       f"results={tmp_path}/nothing", tiny(cifar), cwd=tmp_path)  # fmt: skip
    assert base.code == 0, base.err[-2000:]
    results = tmp_path / "results"
    snapshot(tmp_path / "base" / "extrapolation_aspect", results / "extrapolation_aspect" / "runs")
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
