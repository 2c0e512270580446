"""A runs folder from someone else never runs their code: the tools that read runs (``vitpos.compare``,
``scripts/rebuild_reports.py``, the benchmark's ``results=``) import no module that a config read off
disk names in ``encoding.module``. The folder here holds a Hydra job and a run whose configs name a
payload file and a payload package, each writing a marker file when imported; every tool reads the
folder, and the marker must not exist afterwards. A plug-in is imported only when the command names it.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import ROOT, compose_train
from omegaconf import OmegaConf, open_dict

from vitpos import runtime
from vitpos.encodings.plugins import module_digest

ASPECT = ROOT / "docs" / "results" / "extrapolation_aspect" / "runs" / "vit_cpu_p2"


def payloads(where: Path, marker: Path) -> list[str]:
    """A payload file and a payload package below ``where`` (on ``sys.path``, as the folder a received
    archive was unpacked in is for ``python -m``), each writing ``marker`` when imported: their specs."""
    code = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    (where / "payload").mkdir(parents=True)
    (where / "payload" / "evil.py").write_text(code)
    (where / "evilpkg").mkdir()
    (where / "evilpkg" / "__init__.py").write_text(code)
    (where / "evilpkg" / "enc.py").write_text(code)
    return [str(where / "payload" / "evil.py"), "evilpkg.enc"]


def malicious_config(module: str, runs: Path):
    cfg = compose_train("data=shapes", "model=vit_micro", "encoding=rope_2d", f"run.root={runs}")
    with open_dict(cfg):
        cfg.encoding.module, cfg.encoding.name = module, "evil"
    return cfg


def plant(folder: Path, specs: list[str], runs: Path) -> None:
    """In ``folder``: a Hydra job per spec that wrote nothing (so its config is checked again), and a
    finished run per spec whose saved config names it."""
    for n, spec in enumerate(specs):
        cfg = malicious_config(spec, runs)
        job = folder / "multirun" / "2026-01-01" / "10-00-00" / str(n)
        (job / ".hydra").mkdir(parents=True)
        OmegaConf.save(cfg, job / ".hydra" / "config.yaml")
        OmegaConf.save({"hydra": {"runtime": {"choices": {"model": "vit_micro"}}}}, job / ".hydra" / "hydra.yaml")
        (job / ".hydra" / "overrides.yaml").write_text(f"- encoding.module={spec}\n- encoding.name=evil\n")
        run = folder / "shapes" / "vit_micro" / f"evil{n}-abcdef" / "seed0"
        run.mkdir(parents=True)
        saved = {"cfg": OmegaConf.to_container(cfg)}
        (run / "hparams.yaml").write_text(yaml.safe_dump(saved))
        (run / "metrics.json").write_text(json.dumps({"status": "complete", "metrics": {"test/acc": 0.5}}))


@pytest.fixture
def evil(tmp_path, monkeypatch):
    """(the runs folder, its payload specs, the marker path) with the payloads importable (and not
    imported yet by an earlier test of this process)."""
    for name in [m for m in sys.modules if m.split(".")[0] == "evilpkg"]:
        monkeypatch.delitem(sys.modules, name)
    marker = tmp_path / "MARKER"
    specs = payloads(tmp_path / "unpacked", marker)
    monkeypatch.syspath_prepend(str(tmp_path / "unpacked"))
    runs = tmp_path / "unpacked" / "runs"
    plant(runs, specs, runs)
    yield runs, specs, marker
    assert not marker.exists(), f"a tool ran code named in a saved config: {marker.read_text()}"


def test_compare_names_the_jobs_without_importing_their_plugins(evil, tmp_path, capsys):
    from vitpos.compare.summary import main

    runs, specs, marker = evil
    assert main([f"runs={runs}", f"out={tmp_path / 'report'}", f"multirun=[{runs / 'multirun'}]"]) == 0
    report = (tmp_path / "report" / "report.md").read_text()
    assert "2 jobs, 2 failed:" in report  # found and listed, from checks that import nothing
    assert not marker.exists()


def test_a_plugin_found_by_module_name_runs_no_init_file(evil):
    """Digesting ``evilpkg.enc`` (the run folder's hash) finds it package by package without running
    ``evilpkg/__init__.py``, as :func:`importlib.util.find_spec` would."""
    runs, specs, marker = evil
    assert module_digest(specs[1]) is not None and module_digest(specs[0]) is not None


def test_rebuild_reports_reads_a_received_runs_folder_without_running_it(evil, tmp_path, capsys):
    from scripts.rebuild_reports import main

    runs, specs, marker = evil
    assert main(["received", str(runs), "--into", str(tmp_path / "into")]) == 0
    assert (tmp_path / "into" / "received" / "report.md").is_file()


def test_the_benchmark_compares_a_received_results_folder_without_running_it(evil, tmp_path, monkeypatch, capsys):
    """``results=`` a folder whose aspect report holds a committed run beside a planted job: the plan
    reads it, a stand-in for training finishes the new runs, and the report over both reads every config."""
    import vitpos.benchmark
    import vitpos.train
    from vitpos.run.identity import run_dir

    runs, specs, marker = evil
    monkeypatch.setattr(runtime, "cpu_supports_bf16", lambda: False)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    monkeypatch.setattr(vitpos.benchmark, "check_configs", lambda plans: None)  # the data path: not the point here
    results = tmp_path / "results"
    (source,) = ASPECT.glob("none-*")
    for seed in (0, 1):
        folder = results / "extrapolation_aspect" / "runs" / "vit_cpu_p2" / source.name / f"seed{seed}"
        folder.mkdir(parents=True)
        saved = yaml.safe_load((source / "seed0" / "hparams.yaml").read_text())
        saved["cfg"]["run"].update(precision="32-true", machine="cpu-avx2")
        saved["cfg"]["seed"] = seed
        (folder / "hparams.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
        metrics = {"test/acc": 0.5 + seed / 100, "time/fit_min": 10.0, "time/eval_min": 1.0}
        (folder / "metrics.json").write_text(json.dumps({"status": "complete", "metrics": metrics}))
    shutil.copytree(runs / "multirun", results / "extrapolation_aspect" / "runs" / "vit_cpu_p2" / source.name / "jobs")

    def finished(cfg):
        folder = run_dir(cfg)
        folder.mkdir(parents=True, exist_ok=True)
        metrics = {"test/acc": 0.51}
        (folder / "metrics.json").write_text(json.dumps({"status": "complete", "metrics": metrics}))
        return metrics

    monkeypatch.setattr(vitpos.train, "train", finished)
    args = ["encoding=rope_2d_mixed", "protocols=[aspect]", "seeds=2", "baselines=[]", f"results={results}",
            f"out={tmp_path / 'bench'}"]  # fmt: skip
    assert vitpos.benchmark.main(args) == 0
    report = (tmp_path / "bench" / "aspect" / "report" / "report.md").read_text()
    assert "2 jobs, 2 failed:" in report  # the planted jobs were read, and named failed without their code
