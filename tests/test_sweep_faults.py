"""How ``python train.py -m ...`` composes and checks a sweep (hydra_plugins/vitpos_sweeper, the
default sweeper), and the faults a reliability review found there:

- two identical sweeps at once into one ``hydra.sweep.dir`` each read the other's refused jobs
  from the shared job folders and both reported "2 jobs, 2 failed": the second is now refused up
  front with one line naming ``hydra.sweep.dir``, and the first reports its own jobs;
- the launcher's options were not checked (``hydra.launcher.cpus_per_task=-1`` ran,
  ``timeout_min=0`` let every job run into the time limit and be reported "missing ... killed or
  preempted" on every rerun): they are checked by the schema's ``LAUNCHER`` table, and a sweep
  with missing jobs under a time limit names ``hydra.launcher.timeout_min``;
- Hydra's own options (``hydra.*``, ``hydra/<group>=``) skipped the one-line check: Hydra's
  multi-line report and exit code 1;
- the sweep was expanded with Hydra's private basic sweeper: the sweeper now uses Hydra's public
  override API, makes the same jobs in the same order, and checks every job before any runs.

Every command runs in process through ``train.py``'s ``main`` (``run_command``), but the one where
two processes at once are the point.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import CONFIGS, ROOT, run_command

from vitpos.run import process

TINY = ["data=shapes", "model=vit_micro", "trainer.max_epochs=1", "+trainer.limit_train_batches=5",
        "+trainer.limit_val_batches=2", "data.num_test=64", "eval.resolutions=[]", "task.pictures=false",
        "threads=1"]  # fmt: skip
LOCAL = ["hydra/launcher=vitpos_local"]


def files_under(folder: Path) -> dict[str, int]:
    """Every path below ``folder`` with its file's modification time (folders: 0)."""
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns if p.is_file() else 0 for p in folder.rglob("*")}


def one_error(ran, *needles: str) -> str:
    """Exit code 2, nothing on stderr but one ``error:`` line holding every needle, no traceback."""
    assert ran.code == 2, ran.out + ran.err
    lines = ran.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), ran.out + ran.err
    assert "Traceback" not in ran.out + ran.err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# ------------------------------------------------------------ the sweeper, through Hydra's public API only
SCANNED = ("vitpos", "hydra_plugins", "train.py", "scripts")


def test_no_private_hydra_module_is_imported():
    """``hydra._internal`` is Hydra's to change in any release: vitpos composes through Hydra's main,
    its compose API and a registered sweeper plugin only."""
    found = []
    for top in SCANNED:
        paths = [ROOT / top] if top.endswith(".py") else sorted((ROOT / top).rglob("*.py"))
        for path in paths:
            for num, line in enumerate(path.read_text().splitlines(), 1):
                if "hydra._internal" in line:
                    found.append(f"{path.relative_to(ROOT)}:{num}: {line.strip()}")
    assert (ROOT / "hydra_plugins" / "vitpos_sweeper" / "checked.py").is_file()  # the scan reaches the sweeper
    assert not found, "\n".join(found)


def test_the_checked_sweeper_is_the_default():
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(str(CONFIGS), version_base="1.3"):
        cfg = compose("train", overrides=["experiment=compare_cifar_full"], return_hydra_config=True)
    assert cfg.hydra.sweeper._target_ == "hydra_plugins.vitpos_sweeper.checked.CheckedSweeper"
    assert str(cfg.hydra.sweeper.params.seed) == "0,1,2"  # an experiment's sweep reaches it


def basic_sweeper_jobs(words: list[str]) -> list[list[str]]:
    """The jobs Hydra's basic sweeper makes of ``words`` (the order the run folders and summaries
    were made in before the checked sweeper): the reference the sweeper's order is held to."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides = OverridesParser.create().parse_overrides(words)
    return [list(job) for batch in BasicSweeper.split_arguments(overrides, None) for job in batch]


EXPERIMENTS = sorted(p.stem for p in (CONFIGS / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_sweeps_the_same_jobs_in_the_same_order(experiment):
    """``python train.py -m experiment=NAME seed=3,4 data.batch_size=32``: ``hydra.sweeper.params``
    first, then the command line's, every job's overrides in the order Hydra's basic sweeper gave
    them (a command line sweep of a key the experiment sweeps too replaces its values in place)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from hydra_plugins.vitpos_sweeper.checked import job_overrides

    with initialize_config_dir(str(CONFIGS), version_base="1.3"):
        cfg = compose("train", overrides=[f"experiment={experiment}"], return_hydra_config=True)
    params = [f"{key}={value}" for key, value in (cfg.hydra.sweeper.params or {}).items()]
    for command in ([], ["seed=3,4", "data.batch_size=32"], ["encoding=rope_2d,none"]):
        words = [*params, f"experiment={experiment}", *command]
        jobs = job_overrides(OverridesParser.create().parse_overrides(words))
        assert jobs == basic_sweeper_jobs(words) and len(jobs) >= 2, (experiment, command)


def test_range_choice_and_repeated_keys_expand_as_before():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from hydra_plugins.vitpos_sweeper.checked import job_overrides

    words = ["seed=range(0,3)", "encoding=choice(rope_2d,none)", "+x=1", "seed=5,6", "~debug"]
    jobs = job_overrides(OverridesParser.create().parse_overrides(words))
    assert jobs == basic_sweeper_jobs(words)
    assert [job[:3] for job in jobs[:2]] == [
        ["seed=5", "encoding=rope_2d", "+x=1"],
        ["seed=5", "encoding=none", "+x=1"],
    ]
    assert len(jobs) == 4  # seed=5,6 replaced range(0,3), in its place


def test_a_job_the_config_check_refuses_stops_the_sweep_before_any_job(tmp_path):
    """``python train.py -m data=shapes encoding=rope_2d,alibi``: alibi is for sequences. Composed
    and checked before the first job: one line, exit 2, no multirun.yaml, no job, no run folder."""
    ran = run_command("train.py", "-m", *TINY, "encoding=rope_2d,alibi", "run.root=R", cwd=tmp_path)
    one_error(ran, "encoding: 'alibi' is for sequences, this is an image task")
    assert "[job " not in ran.out and "sweep " not in ran.out, ran.out
    assert list(tmp_path.iterdir()) == []


def test_a_job_made_of_an_experiments_sweep_is_checked_too(tmp_path):
    """``python train.py -m experiment=compare_sequence model.dim=36``: the experiment's
    ``hydra.sweeper.params`` make the jobs; the fourth (seed 0, rope_1d) cannot split a head of 9
    into pairs. Refused before the first three run."""
    ran = run_command("train.py", "-m", "experiment=compare_sequence", "model.dim=36", "run.root=R", cwd=tmp_path)
    one_error(ran, "encoding: encoding 'rope_1d' needs a head dim", "36/4")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------ case 1: one sweep folder, two sweeps
def hold(folder: Path, pid: int) -> None:
    """``folder/.lock`` as a live sweep's main process writes it."""
    import json

    folder.mkdir(parents=True)
    body = {"pid": pid, "started": process.start_time(pid), "host": socket.gethostname(), "command": "train.py -m"}
    (folder / ".lock").write_text(json.dumps(body) + "\n")


def test_a_second_sweep_into_a_busy_sweep_folder_is_refused(tmp_path):
    """``python train.py -m ... seed=0,1 hydra.sweep.dir=S`` while the same command runs (its
    process holds S/.lock): refused before it writes anything, naming hydra.sweep.dir and the
    holder, instead of sharing S's job folders and reporting the other sweep's jobs as its own."""
    sweep = tmp_path / "S"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        hold(sweep, sleeper.pid)
        before = files_under(tmp_path)
        ran = run_command("train.py", "-m", *TINY, "seed=0,1", "run.root=R", f"hydra.sweep.dir={sweep}", cwd=tmp_path)
        one_error(
            ran, f"error: hydra.sweep.dir: {sweep} is in use by process {sleeper.pid}", "hydra.sweep.dir=<folder>"
        )
        assert files_under(tmp_path) == before  # no multirun.yaml, no job folder, no run
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.slow
def test_two_identical_sweeps_at_once_each_report_their_own_jobs(tmp_path):
    """The user's case, two real processes: the first sweep runs and reports its 2 jobs finished;
    the second, started while the first runs, is refused with one line; compare sees 2 finished
    jobs; the same command after the first ended finds both runs finished and says so."""
    from vitpos.compare import compare

    sweep = tmp_path / "S"
    words = ["-m", *TINY, "seed=0,1", f"run.root={tmp_path / 'R'}", f"hydra.sweep.dir={sweep}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *words], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    deadline = time.monotonic() + 600
    while not (sweep / ".lock").exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (sweep / ".lock").exists(), first.communicate()[0]
    second = run_command("train.py", *words, cwd=tmp_path)
    one_error(second, f"hydra.sweep.dir: {sweep} is in use by process {first.pid}")
    out = first.communicate(timeout=1200)[0]
    assert first.returncode == 0, out[-3000:]
    assert f"sweep {sweep}: 2 jobs, 0 failed, 0 missing, 2 finished" in out, out[-3000:]
    assert not (sweep / ".lock").exists()  # released: the next sweep may use the folder
    report = compare(tmp_path / "R", tmp_path / "report", [str(sweep)]).report
    assert "2 jobs, 0 failed." in report and "None: all 2 runs are complete." in report, report
    again = run_command("train.py", *words, cwd=tmp_path)
    assert again.code == 0 and f"sweep {sweep}: 2 jobs, 0 failed, 0 missing, 2 finished" in again.out, again.out


# ------------------------------------------------------------ cases 2 and 4: the launcher's options
@pytest.mark.parametrize(
    ("launcher", "needle"),
    [
        (
            ["hydra.launcher.cpus_per_task=-1"],
            "hydra.launcher.cpus_per_task: must be an integer >= 1 (or null), got -1",
        ),
        (["hydra.launcher.timeout_min=0"], "hydra.launcher.timeout_min: must be an integer >= 1, got 0"),
        (["hydra.launcher.nodes=0"], "hydra.launcher.nodes: must be an integer >= 1, got 0"),
    ],
    ids=["cpus_per_task=-1", "timeout_min=0", "nodes=0"],
)
def test_a_launcher_option_out_of_range_is_refused_before_any_job(tmp_path, launcher, needle):
    """``python train.py -m hydra/launcher=vitpos_local hydra.launcher.timeout_min=0 ...``: every job
    would have run into a time limit of 0 minutes and been reported missing; -1 CPUs ran as given."""
    ran = run_command("train.py", "-m", *LOCAL, *launcher, *TINY, "seed=0,1", "run.root=R", cwd=tmp_path)
    one_error(ran, needle, f"(e.g. {needle.split(':')[0]}=")
    assert list(tmp_path.iterdir()) == []


def test_joblib_takes_every_core_but_not_zero_jobs(tmp_path):
    ran = run_command("train.py", "-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=0", *TINY, cwd=tmp_path)
    one_error(ran, "hydra.launcher.n_jobs: must be an integer >= 1 (or -1), got 0")
    assert list(tmp_path.iterdir()) == []
    from vitpos.checks.options import check_launcher

    check_launcher({"n_jobs": -1, "timeout_min": 1, "cpus_per_task": None})  # joblib's default; a null: unset


def summary(tmp_path: Path, *words: str) -> str:
    """What the sweep's summary says for a sweep folder whose job 0 finished and job 1 left no
    result (a killed process), under the config ``python train.py -m WORDS`` composes."""
    import contextlib
    import io

    from hydra import compose, initialize_config_dir

    from vitpos.run.sweep import OUTCOME_FILE, SweepReport

    sweep = tmp_path / "S"
    (sweep / "0").mkdir(parents=True)
    (sweep / "0" / OUTCOME_FILE).write_text("test/acc 0.5000 (R/x)\n")
    (sweep / "1").mkdir()
    with initialize_config_dir(str(CONFIGS), version_base="1.3"):
        cfg = compose("train", overrides=[*words, f"hydra.sweep.dir={sweep}"], return_hydra_config=True)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        SweepReport().on_multirun_end(cfg)
    return out.getvalue()


def test_missing_jobs_under_a_time_limit_name_it(tmp_path):
    """``python train.py -m hydra/launcher=vitpos_local hydra.launcher.timeout_min=1 ...`` whose jobs
    need longer: the killed job is missing, and the summary names the time limit as a cause."""
    text = summary(tmp_path, *LOCAL, "hydra.launcher.timeout_min=1")
    assert "2 jobs, 0 failed, 1 missing, 1 finished" in text, text
    assert "a missing job may have run out of time: hydra.launcher.timeout_min=1 (minutes; raise it)" in text, text


def test_missing_jobs_without_a_time_limit_do_not_name_one(tmp_path):
    text = summary(tmp_path)  # Hydra's basic launcher: no time limit
    assert "1 missing" in text and "timeout_min" not in text, text


# ------------------------------------------------------------ case 3: Hydra's own options, one line
@pytest.mark.parametrize(
    ("words", "needles"),
    [
        (["hydra.launcher.nosuch=1"], ["hydra.launcher.nosuch: no such option", "the launcher chosen takes none"]),
        ([*LOCAL, "hydra.launcher.nosuch=1"], ["hydra.launcher.nosuch: no such option", "hydra.launcher.timeout_min"]),
        (
            [*LOCAL, "hydra.launcher.timeout_min=abc"],
            ["hydra.launcher.timeout_min: must be an integer >= 1, got 'abc'"],
        ),
        (["hydra.launcher.timeout_min=abc"], ["hydra.launcher.timeout_min: no such option", "vitpos_local"]),
        (["hydra/launcher=submitit_lcoal"], ["hydra/launcher: no config 'submitit_lcoal'", "submitit_local, "]),
        (["hydra/sweeper=nosuch"], ["hydra/sweeper: no config 'nosuch'", "valid: basic, vitpos"]),
    ],
    ids=["nosuch-basic", "nosuch-local", "timeout-abc", "timeout-basic", "launcher-typo", "sweeper-typo"],
)
@pytest.mark.parametrize("mode", [["-m"], []], ids=["sweep", "single"])
def test_a_bad_hydra_option_is_one_line(tmp_path, words, needles, mode):
    """``python train.py [-m] hydra.launcher.nosuch=1 ...``: as a bad ``data.nosuch`` is, one line
    and exit 2 (Hydra's own report was many lines and exit 1), with the valid choices."""
    ran = run_command("train.py", *mode, *words, *TINY, "run.root=R", cwd=tmp_path)
    line = one_error(ran, *needles)
    assert not re.search(r"\+hydra\.\S+ adds a new key", line), line  # an unknown launcher option is no new key
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_of_a_hydra_option_is_one_line(tmp_path):
    """``python train.py -m hydra.launcher.n_jobs=1,2``: Hydra sweeps the run's options only."""
    ran = run_command("train.py", "-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=1,2", *TINY, cwd=tmp_path)
    one_error(
        ran, "hydra.launcher.n_jobs: Hydra sweeps the run's options, not its own", "hydra.launcher.n_jobs=<value>"
    )
    assert list(tmp_path.iterdir()) == []


def test_hydra_raises_a_failed_composition_only_until_the_config_composed(monkeypatch):
    """train.py sets HYDRA_FULL_ERROR so that Hydra raises what it cannot compose (worded in one line);
    the sweep's start unsets it, also where no job runs in the main process (joblib), and a value the
    user set is left alone."""
    from omegaconf import OmegaConf

    from vitpos.run import signals, sweep

    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    assert sweep.raise_composition_errors() and sweep.composing() and os.environ["HYDRA_FULL_ERROR"] == "1"
    config = OmegaConf.create({"hydra": {"launcher": {"_target_": "hydra_plugins.joblib.JoblibLauncher"}}})
    try:
        sweep.SweepReport().on_multirun_start(config)
    finally:
        signals.uninstall()
    assert "HYDRA_FULL_ERROR" not in os.environ and not sweep.composing()
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")  # the user's own
    assert not sweep.raise_composition_errors()
    sweep.composed()
    assert os.environ["HYDRA_FULL_ERROR"] == "1"
