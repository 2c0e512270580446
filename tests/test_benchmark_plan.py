"""``python -m vitpos.benchmark`` before it trains: each bad option refused in one line with nothing
written and no run started, the plan's minutes for every run on an AVX2-only machine (torch held to
AVX2 kernels by patching the machine-kind probe of vitpos/runtime.py), and SIGTERM / SIGINT exits
as ``train.py``'s. Nothing here trains: ``vitpos.train.train`` is replaced by a function that fails
the test (or sends the signal)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
import torch
import yaml
from conftest import ROOT, run_command

from vitpos import runtime
from vitpos.benchmark import BenchmarkOptions, make_plan, show
from vitpos.benchmark.minutes import kind_ratio
from vitpos.benchmark.options import PROTOCOLS
from vitpos.benchmark.plan import seeds_of

ASPECT = ROOT / "docs" / "results" / "extrapolation_aspect" / "runs" / "vit_cpu_p2"


@pytest.fixture
def avx2(monkeypatch):
    """This process as an AVX2-only CPU: no native bf16, torch's capability AVX2 (as
    ``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2`` would make it)."""
    monkeypatch.setattr(runtime, "cpu_supports_bf16", lambda: False)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    kind_ratio.cache_clear()


@pytest.fixture
def no_training(monkeypatch):
    import vitpos.train

    def refuse(cfg):
        raise AssertionError("the benchmark started a training")

    monkeypatch.setattr(vitpos.train, "train", refuse)


def committed(results: Path, precision: str, machine: str, accs: dict[str, list[float]]) -> Path:
    """A results folder holding an aspect report: the committed snapshots' configs of ``accs``'s
    encodings, recorded as trained in ``precision`` on ``machine``, scoring ``accs[name][seed]``."""
    for name, values in accs.items():
        (source,) = ASPECT.glob(f"{name}-*")
        for seed, acc in enumerate(values):
            folder = results / "extrapolation_aspect" / "runs" / "vit_cpu_p2" / source.name / f"seed{seed}"
            folder.mkdir(parents=True)
            saved = yaml.safe_load((source / "seed0" / "hparams.yaml").read_text())
            saved["cfg"]["run"].update(precision=precision, machine=machine)
            saved["cfg"]["seed"] = seed
            (folder / "hparams.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
            metrics = {"test/acc": acc, "time/fit_min": 10.0, "time/eval_min": 1.0}
            (folder / "metrics.json").write_text(json.dumps({"status": "complete", "metrics": metrics}))
    return results


def refused(tmp_path: Path, *args: str) -> str:
    """The one error line of ``python -m vitpos.benchmark ARGS`` run in ``tmp_path``; asserts exit 2,
    no traceback, and nothing new in ``tmp_path``."""
    before = sorted(p.name for p in tmp_path.iterdir())
    ran = run_command("vitpos.benchmark", *args, cwd=tmp_path)
    out = ran.out + ran.err
    errors = [line for line in ran.err.splitlines() if line.startswith("error: ")]
    assert ran.code == 2 and "Traceback" not in out and len(errors) == 1, out
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "something was written"
    assert "plan:" not in ran.out, "it planned before refusing"
    return errors[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["seeds=0"], "error: seeds: 0 is not a seed count (give 1 or more"),
        (["seeds=-1"], "error: seeds: -1 is not a seed count"),
        (["protocols=[]"], "error: protocols: empty: nothing to score (name one or more of full, native, aspect"),
        (["baselines=[nosuch]"], "error: baselines: unknown nosuch (valid: alibi_2d, "),
        (["results=nowhere"], "error: results: nowhere is not a folder (the committed reports are in docs/results"),
        ([f"results={ROOT / 'docs'}"], "holds no committed report of aspect (extrapolation_aspect/runs)"),
        (["out=afile"], "error: out: afile is a file (give a folder you can write with out=DIR)"),
        (["overrides=[data.batch_sizee=3]"], "error: overrides: data.batch_sizee: no such option (did you mean "),
    ],
    ids=["seeds-0", "seeds-negative", "protocols-empty", "baselines-unknown", "results-missing", "results-docs",
         "out-file", "override-typo"],
)  # fmt: skip
def test_bad_options_are_refused_in_one_line_before_anything_runs(tmp_path, no_training, args, message):
    (tmp_path / "afile").write_text("not a folder")
    line = refused(tmp_path, "encoding=rope_2d_mixed", "protocols=[aspect]", *args)
    assert line.startswith(message) or message in line, line


def mount_refusal() -> str | None:
    """None when a tmpfs can be mounted here (root with CAP_SYS_ADMIN), else why not."""
    probe = Path(os.environ.get("TMPDIR", "/tmp")) / f"vitpos-mount-probe-{os.getpid()}"
    probe.mkdir(exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(probe)], capture_output=True)
    except OSError as err:
        return f"no mount command ({err})"
    finally:
        subprocess.run(["umount", str(probe)], capture_output=True)
        probe.rmdir()
    return None if done.returncode == 0 else done.stderr.decode(errors="replace").strip()


def test_a_read_only_out_is_refused_without_naming_run_root(tmpfs, tmp_path, no_training):
    """A read-only disk (a tmpfs mounted ``ro``: ``chmod`` would not stop root)."""
    why = mount_refusal()
    if why is not None:
        pytest.skip(f"needs `mount -t tmpfs` for a read-only disk; refused here: {why}")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(tmpfs)], check=True)
    line = refused(tmp_path, "encoding=rope_2d_mixed", "protocols=[aspect]", f"out={tmpfs / 'bench'}")
    assert line.startswith(f"error: out: {tmpfs} is not writable (Read-only file system)"), line
    assert "run.root" not in line


def test_a_plan_that_would_compare_with_nothing_is_refused_with_its_fixes(tmp_path, avx2, no_training):
    """Committed runs of another precision, or of another budget, are no baselines: with none to
    retrain, the plan is refused before training, naming the options that fix it."""
    results = committed(tmp_path / "results", "bf16-mixed", "cpu-avx512bf16", {"none": [0.5, 0.52]})
    args = ["encoding=rope_2d_mixed", "protocols=[aspect]", f"results={results}", "baselines=[]"]
    line = refused(tmp_path, *args)
    expected = ("error: baselines: this machine trains in 32-true (cpu-avx2), the committed aspect runs in "
                "bf16-mixed (cpu-avx512bf16): rope_2d_mixed would be compared with nothing")  # fmt: skip
    assert line.startswith(expected), line
    assert "baselines=[none,rope_2d,cpe]" in line and "trainer.precision=auto gives bf16-mixed" in line
    shutil.rmtree(results)
    results = committed(tmp_path / "results", "32-true", "cpu-avx2", {"none": [0.5, 0.52]})
    line = refused(tmp_path, *args, "overrides=[trainer.max_epochs=1]")
    assert "no committed aspect run has this budget (cifar10, full train set (5,000 val) × 1 epoch," in line, line
    assert "drop the overrides that change the budget" in line


def test_the_avx2_plan_gives_minutes_for_every_run_and_names_the_retrained(avx2):
    """On an AVX2-only machine the committed bf16 runs cannot be compared with: the plan retrains
    the baselines, says why, and gives every run estimated minutes with their basis."""
    opts = BenchmarkOptions(encoding="rope_2d_mixed")
    plans = [make_plan(opts, protocol) for protocol in opts.protocols]
    runs = [r for p in plans for r in p.runs]
    seeds = sum(len(seeds_of(PROTOCOLS[protocol][0])) for protocol in opts.protocols)
    assert len(runs) == 4 * seeds  # the encoding and three baselines, at each protocol's committed seeds
    assert all(r.minutes.low is not None and 0 < r.minutes.low <= r.minutes.high for r in runs)
    assert all(r.minutes.how.startswith("estimated from") for r in runs)
    text = show(plans, Path(opts.out))
    assert "without an estimate" not in text and "unknown" not in text, text
    for p in plans:
        note = (f"note: {p.protocol}: this machine trains in 32-true (cpu-avx2), the committed {p.protocol} "
                "runs in bf16-mixed (cpu-avx512bf16): comparing against none, rope_2d, cpe retrained here")  # fmt: skip
        assert note in text
    assert "minutes on cpu-avx2: committed cpu-avx512bf16 minutes of this budget × " in text
    low = sum(r.minutes.low for r in runs)
    assert f"expected: about {low:.0f}-" in text and f"minutes for {len(runs)} runs on this machine" in text


def test_the_plan_on_the_committed_kind_measures_and_retrains_nothing(monkeypatch):
    monkeypatch.setattr(runtime, "cpu_supports_bf16", lambda: True)
    (p,) = [make_plan(BenchmarkOptions(encoding="rope_2d_mixed", protocols=["aspect"]), "aspect")]
    assert [r.encoding for r in p.runs] == ["rope_2d_mixed"] * len(seeds_of("extrapolation_aspect")) and not p.note
    own = list(ASPECT.glob("rope_2d_mixed-*/seed*/metrics.json"))
    assert len(p.committed) == len(list(ASPECT.glob("*/seed*/metrics.json"))) - len(own) > 0  # its own: scored anew
    assert all(r.minutes.how == f"measured, mean of its {len(own)} committed runs" for r in p.runs)
    assert p.runs[0].minutes.low == p.runs[0].minutes.high > 0


def test_a_kind_without_basis_says_so(tmp_path, monkeypatch):
    """No committed run on this kind and no configuration committed on both kinds: no invented number."""
    monkeypatch.setattr(runtime, "machine_kind", lambda accelerator="auto": "cpu-other")
    monkeypatch.setattr("vitpos.benchmark.plan.machine_kind", lambda accelerator="auto": "cpu-other")
    kind_ratio.cache_clear()
    here = str(runtime.trainer_precision({"precision": "auto"}))
    results = committed(tmp_path / "results", here, "cpu-elsewhere", {"none": [0.5, 0.52]})
    p = make_plan(BenchmarkOptions(encoding="rope_2d_mixed", protocols=["aspect"], results=str(results)), "aspect")
    assert all(r.minutes.low is None for r in p.runs)
    text = show([p], tmp_path)
    assert "2 runs without an estimate" in text and "no committed run of this budget on cpu-other" in text


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["TERM", "INT"])
def test_a_signal_stops_it_with_train_pys_exit_code(tmp_path, avx2, monkeypatch, signum, code):
    import vitpos.benchmark
    import vitpos.train

    results = committed(tmp_path / "results", "32-true", "cpu-avx2", {"none": [0.5, 0.52], "rope_2d": [0.55, 0.56]})
    monkeypatch.setattr(vitpos.benchmark, "check_configs", lambda plans: None)  # the data path: not the point here
    monkeypatch.setattr(vitpos.train, "train", lambda cfg: os.kill(os.getpid(), signum))
    ran = run_command("vitpos.benchmark", "encoding=rope_2d_mixed", "protocols=[aspect]", f"results={results}",
                      f"out={tmp_path / 'out'}", cwd=tmp_path)  # fmt: skip
    assert ran.code == code, ran.out + ran.err
    assert f"stopped by {signal.Signals(signum).name}. To resume, run the same command again" in ran.out
    assert signal.getsignal(signal.SIGTERM) is not None  # the handlers were put back
