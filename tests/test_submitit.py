"""Sweeps through vitpos's submitit launcher (``hydra/launcher=vitpos_local``: every job in a
process of its own, as on a SLURM cluster with ``vitpos_slurm``), on CPU at a tiny size.

The sweep command runs in process (``train.py``'s ``main``); its jobs are submitit's own
processes. The jobs' lines go to their logs under ``<sweep>/.submitit/``, and the sweep's
summary (vitpos/run/sweep.py) is printed by the launching process from the job folders:
finished (``outcome.txt``), failed (``error.log``) or missing (neither: a killed job).
The preemption test kills a job's process (a real signal): the sweep waits for the other job and
lists the killed one as missing (hydra_plugins/vitpos_submitit), and resubmitting resumes it.
The plugin's own names (``submitit_local``, ``submitit_slurm``) compose to the plugin's launchers.
"""

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest
import torch
from conftest import ROOT, run_command

TINY = [
    "data=shapes", "model=vit_micro", "trainer.max_epochs=1", "data.num_train=256", "data.val_size=64",
    "data.num_test=64", "data.batch_size=64", "trainer.enable_progress_bar=false", "task.pictures=false",
    "eval.resolutions=[]",
]  # fmt: skip
LOCAL = ["-m", "hydra/launcher=vitpos_local"]


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    """The job processes inherit the environment: one torch thread each, beside the other jobs."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def held_run_folder(runs, *overrides: str):
    """The run folder ``python train.py OVERRIDES run.root=RUNS`` trains in (vit_micro), held by a live
    process as a run in progress holds it: a job for that run is refused when it starts."""
    from hydra import compose, initialize_config_dir

    from vitpos.run import folder as run_folder
    from vitpos.run.identity import run_dir

    with initialize_config_dir(str(ROOT / "configs"), version_base="1.3"):
        cfg = compose("train", overrides=[*overrides, f"run.root={runs}", "run.model=vit_micro"])
    held = run_dir(cfg)
    held.mkdir(parents=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1200)"])
    body = {"pid": sleeper.pid, "host": run_folder.socket.gethostname(), "command": "train.py"}
    (held / run_folder.LOCK).write_text(json.dumps(body))
    return sleeper


@pytest.mark.slow
def test_two_jobs_finish_a_failed_one_is_reported_and_compare_lists_them(tmp_path):
    """Job 2 fails as it starts (its run folder is in use: every job passed the sweep's config check,
    which refuses a bad option before any job runs), the other two finish."""
    sweep, runs = tmp_path / "multirun", tmp_path / "runs"
    sleeper = held_run_folder(runs, *TINY, "encoding=alibi_2d")
    try:
        ran = run_command("train.py", *LOCAL, *TINY, "encoding=rope_2d,learned_1d,alibi_2d",
                          f"run.root={runs}", f"hydra.sweep.dir={sweep}", cwd=tmp_path)  # fmt: skip
    finally:
        sleeper.kill()
        sleeper.wait()
    out = ran.out + ran.err
    assert ran.code == 1, out  # a job failed: the sweep's exit status says so
    assert f"sweep {sweep}: 3 jobs, 1 failed, 0 missing, 2 finished" in out, out
    assert f"failed: {sweep}/2: error: run folder: " in out and f"in use by process {sleeper.pid}" in out, out
    assert f"job logs: {sweep}/.submitit/<job id>/" in out
    logs = "".join(p.read_text() for p in sweep.glob(".submitit/*/*_log.out"))
    for num, name in enumerate(("rope_2d", "learned_1d", "alibi_2d")):  # each job's own lines, in its own log
        assert f"[job {num}] start: " in logs and f"encoding={name}" in logs, logs
    assert (sweep / "0" / "outcome.txt").read_text().startswith("test/acc ")

    report = run_command("vitpos.compare", f"runs={runs}", f"multirun=[{sweep}]", f"out={tmp_path / 'report'}")
    assert report.code == 0, report.out + report.err
    md = (tmp_path / "report" / "report.md").read_text()
    assert "rope_2d" in md and "learned_1d" in md, md
    (failed,) = [line for line in md.splitlines() if line.startswith(f"- `{sweep}/2`")]
    assert "3 jobs, 1 failed:" in md and " encoding=alibi_2d " in failed and "error: run folder: " in failed
    metrics = sorted(runs.glob("shapes/vit_micro/*/seed0/metrics.json"))
    assert [m.parents[1].name.split("-")[0] for m in metrics] == ["learned_1d", "rope_2d"]


class FakeJob:
    """A submitit job as the launcher sees it: ``results()`` returns or raises."""

    def __init__(self, outcome):
        self.outcome = outcome

    def results(self):
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return [self.outcome]


def test_every_job_is_waited_for_and_a_dead_one_is_left_missing_or_failed(tmp_path):
    """hydra_plugins/vitpos_submitit: the jobs after a dead one are still collected; a killed job's
    folder exists with neither result file (missing), a job that raised outside train.py gets its
    last line in ``error.log`` (failed), and every JobReturn is completed, so Hydra raises nothing."""
    from hydra.core.utils import JobReturn, JobStatus
    from submitit.core.utils import FailedJobError, UncompletedJobError

    from hydra_plugins.vitpos_submitit.tolerant import wait_for_every_job

    done = JobReturn()
    done.status, done.return_value = JobStatus.COMPLETED, {"test/acc": 0.5}
    crashed = FailedJobError("Traceback (most recent call last):\n  ...\nMemoryError: out of memory")
    jobs = [FakeJob(UncompletedJobError("Job 7 has not produced any output")), FakeJob(crashed), FakeJob(done)]
    returns = wait_for_every_job(jobs, 3, tmp_path)
    assert returns[2] is done and [r.status for r in returns] == [JobStatus.COMPLETED] * 3
    assert returns[0].return_value is None and returns[1].return_value is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["3", "4"]  # job 5 finished: its folder is its own
    assert list((tmp_path / "3").iterdir()) == []  # missing: neither outcome.txt nor error.log
    assert (tmp_path / "4" / "error.log").read_text() == "error: MemoryError: out of memory\n"


PLUGIN = "hydra_plugins.hydra_submitit_launcher.submitit_launcher."
OURS = "hydra_plugins.vitpos_submitit.tolerant."


@pytest.mark.parametrize(
    ("choice", "target"),
    [("vitpos_slurm", OURS + "TolerantSlurmLauncher"), ("vitpos_local", OURS + "TolerantLocalLauncher"),
     ("submitit_slurm", PLUGIN + "SlurmLauncher"), ("submitit_local", PLUGIN + "LocalLauncher")],
)  # fmt: skip
def test_the_launcher_a_user_names_is_the_one_that_runs(choice, target):
    """``hydra/launcher=vitpos_slurm`` composes to vitpos's class, with every option of the plugin's
    config; the plugin's own names compose to the plugin's own classes, left as they are."""
    from hydra import compose, initialize_config_dir
    from hydra.utils import get_class
    from hydra_plugins.hydra_submitit_launcher.config import LocalQueueConf, SlurmQueueConf

    with initialize_config_dir(str(ROOT / "configs"), version_base="1.3"):
        cfg = compose("train", overrides=[f"hydra/launcher={choice}"], return_hydra_config=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_ == target
    fields = (SlurmQueueConf if "slurm" in choice else LocalQueueConf).__dataclass_fields__
    assert set(launcher) == set(fields)
    plugin_class = PLUGIN + ("SlurmLauncher" if "slurm" in choice else "LocalLauncher")
    # by name: Hydra's plugin scan executes the plugin modules again, each time with new class objects
    assert plugin_class in [f"{c.__module__}.{c.__qualname__}" for c in get_class(target).__mro__]


@pytest.mark.slow
def test_hydra_finds_every_plugin_class_a_config_names(tmp_path):
    """Hydra builds a sweeper or launcher only from the plugin classes it found: in the ``hydra_plugins``
    namespace (Hydra 1.3) or by the ``hydra.plugins`` entry points (Hydra 1.4, which in an editable install
    cannot list an editable install's files and warns at every command). Asked from a folder outside the
    repository, as ``vitpos-train`` runs, with warnings as errors."""
    from omegaconf import OmegaConf

    named = {OmegaConf.load(p).get("_target_") for p in (ROOT / "configs" / "hydra").glob("*/vitpos*.yaml")} - {None}
    ask = (
        "from hydra.core.plugins import Plugins; from hydra.plugins.launcher import Launcher; "
        "from hydra.plugins.sweeper import Sweeper; found = Plugins.instance().discover; "
        "print(*(f'{c.__module__}.{c.__qualname__}' for k in (Sweeper, Launcher) for c in found(k)))"
    )
    found = subprocess.run([sys.executable, "-W", "error", "-c", ask], cwd=tmp_path, capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    assert len(named) == 3 and named <= set(found.stdout.split()), (named, found.stdout)


class FakeExecutor:
    """``submitit.AutoExecutor`` as the launchers drive it: what they pass, and jobs that return
    (or raise) without any process."""

    outcomes: list = []

    def __init__(self, **init):
        self.calls = [("init", init)]

    def update_parameters(self, **params):
        self.calls.append(("parameters", params))

    def map_array(self, fn, *iterables):
        self.calls.append(("map_array", [list(column) for column in iterables[:4]]))
        FakeExecutor.last = self
        return [FakeJob(outcome) for outcome in FakeExecutor.outcomes]


@pytest.mark.parametrize("kind", ["slurm", "local"])
def test_our_launch_submits_as_the_plugin_does_and_waits_for_every_job(kind, tmp_path, monkeypatch):
    """vitpos's ``launch`` gives the executor the plugin's own parameters and job arguments (the
    plugin's ``launch``, run on the same fake executor, passes the same), then collects every job:
    a killed first job is left missing (its folder, no result file) where the plugin's raises."""
    import submitit
    from hydra.core.utils import JobReturn
    from hydra_plugins.hydra_submitit_launcher import submitit_launcher as plugin
    from omegaconf import OmegaConf
    from submitit.core.utils import UncompletedJobError

    from hydra_plugins.vitpos_submitit import tolerant

    monkeypatch.setattr(submitit, "AutoExecutor", FakeExecutor)  # a test double: no process, no cluster
    params = {"submitit_folder": str(tmp_path / ".submitit/%j"), "timeout_min": 5, "name": "app"}
    if kind == "slurm":
        params |= {"partition": "gpu", "max_num_timeout": 3}
    overrides = [["encoding=rope_2d"], ["encoding=learned_1d"]]

    def launch(cls, outcomes):
        launcher = cls(**params)
        launcher.config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}})
        FakeExecutor.outcomes = outcomes
        return launcher.launch(overrides, 3), FakeExecutor.last.calls

    theirs, ours = getattr(plugin, f"{kind.title()}Launcher"), getattr(tolerant, f"Tolerant{kind.title()}Launcher")
    done = JobReturn()
    returns, calls = launch(ours, [done, done])
    assert returns == [done, done] and calls == launch(theirs, [done, done])[1]
    slurm = kind == "slurm"
    folder = params["submitit_folder"]
    assert calls == [
        ("init", {"cluster": kind, "folder": folder} | ({"slurm_max_num_timeout": 3} if slurm else {})),
        ("parameters", {"timeout_min": 5, "name": "app"} | ({"slurm_partition": "gpu"} if slurm else {})),
        ("map_array", [overrides, ["hydra.sweep.dir"] * 2, [3, 4], ["job_id_for_3", "job_id_for_4"]]),
    ]

    killed = [UncompletedJobError("Job 7 has not produced any output"), done]
    with pytest.raises(UncompletedJobError):
        launch(theirs, killed)
    returns, _ = launch(ours, killed)
    assert returns[1] is done and returns[0].return_value is None
    assert list((tmp_path / "3").iterdir()) == []  # missing: neither outcome.txt nor error.log


def test_each_vitpos_local_job_is_told_how_many_run_at_once(monkeypatch):
    """``VITPOS_JOBS_AT_ONCE`` is set in each job's own process (the launcher, pickled with the job
    count, runs the job there) and is the job count ``threads=auto`` divides the cores by."""
    import pickle

    from hydra_plugins.vitpos_submitit.tolerant import TolerantLocalLauncher
    from vitpos import runtime

    monkeypatch.delenv("VITPOS_JOBS_AT_ONCE", raising=False)
    (base,) = [c for c in TolerantLocalLauncher.__mro__ if c.__name__ == "BaseSubmititLauncher"]  # the plugin's
    monkeypatch.setattr(base, "__call__", lambda self, *args: runtime.sweep_jobs())  # the job: its thread count
    launcher = TolerantLocalLauncher()
    launcher.jobs_at_once = 4  # as launch() sets it before submitting
    assert runtime.sweep_jobs() == 1
    assert pickle.loads(pickle.dumps(launcher))(["encoding=rope_2d"], "hydra.sweep.dir", 0, "id", {}) == 4

    monkeypatch.setattr(runtime, "usable_cores", lambda: 8)
    assert runtime.sweep_jobs() == 4 and runtime.resolve_threads("auto", runtime.sweep_jobs()) == 2
    assert runtime.launcher_workers() == 1  # no joblib workers: each submitit job prints to its own log
    monkeypatch.delenv("VITPOS_JOBS_AT_ONCE")
    assert runtime.sweep_jobs() == 1


# 18 steps per epoch (576 training images after the validation split): a kill lands inside epoch 2
PREEMPT = [
    "data=shapes", "model=vit_micro", "threads=1", "data.num_train=640", "data.num_test=64",
    "data.val_size=64", "data.batch_size=32", "trainer.max_epochs=2", "trainer.enable_progress_bar=false",
    "task.pictures=false", "eval.resolutions=[]",
]  # fmt: skip


def sweep_command(runs, sweep):
    """Two jobs side by side: rope_2d (job 0, the one killed) and learned_1d (job 1, left alone)."""
    return [sys.executable, "train.py", *LOCAL, *PREEMPT, "encoding=rope_2d,learned_1d", f"run.root={runs}",
            f"hydra.sweep.dir={sweep}"]  # fmt: skip


def wait_for(predicate, proc, timeout=600):
    start = time.monotonic()
    while not predicate() and proc.poll() is None and time.monotonic() - start < timeout:
        time.sleep(0.02)
    return predicate()


@pytest.mark.slow
def test_a_preempted_job_is_missing_the_sweep_waits_for_the_others_and_resubmission_resumes_it(tmp_path):
    """One job's process (the one holding its run folder's ``.lock``) is killed with SIGKILL inside
    epoch 2, as a preemption or a node failure would. The launching process still waits for the
    other job, and its summary lists the killed one as missing (hydra_plugins/vitpos_submitit:
    the plugin's own launcher stops at the first dead job with a traceback). The same sweep command again
    skips the finished job and resumes the killed one from ``last.ckpt`` (resume=auto;
    vitpos/run/plan.py). Its weights and metrics equal those of a run that was never stopped
    (test_resume.py compares a plain run the same way)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    plain = run_command("train.py", *PREEMPT, "encoding=rope_2d", f"run.root={tmp_path / 'plain'}", cwd=tmp_path)
    assert plain.code == 0, plain.out + plain.err

    runs, sweep = tmp_path / "runs", tmp_path / "multirun"
    proc = subprocess.Popen(sweep_command(runs, sweep), cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    rope = lambda: next(runs.glob("*/*/rope_2d-*/seed0"), None)  # noqa: E731
    last = lambda: next(rope().glob("checkpoints/last.ckpt"), None) if rope() else None  # noqa: E731
    assert wait_for(lambda: last() is not None, proc), proc.communicate()[0]
    lock = json.loads((rope() / ".lock").read_text())
    assert lock["pid"] != proc.pid  # the job runs in a process of its own
    os.kill(lock["pid"], signal.SIGKILL)
    first = proc.communicate(timeout=600)[0]
    assert proc.returncode == 1, first[-3000:]  # no traceback: a summary, and the exit status of a failed sweep
    assert f"sweep {sweep}: 2 jobs, 0 failed, 1 missing, 1 finished" in first, first[-3000:]
    assert f"missing: {sweep}/0: no result (killed or preempted: rerun the sweep to resume it)" in first
    assert "Traceback" not in first, first[-3000:]
    assert torch.load(last(), map_location="cpu", weights_only=True)["epoch"] == 0, "killed after epoch 2 ended"
    assert not (rope() / "metrics.json").exists()
    assert len(list(runs.glob("*/*/learned_1d-*/seed0/metrics.json"))) == 1  # the other job finished meanwhile

    again = subprocess.run(sweep_command(runs, sweep), cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"sweep {sweep}: 2 jobs, 0 failed, 0 missing, 2 finished" in again.stdout
    logs = "".join(p.read_text() for p in sweep.glob(".submitit/*/*_log.*"))
    assert "resuming from " in logs and "last.ckpt" in logs, logs[-3000:]
    assert "finished earlier" in logs  # learned_1d: its stored metrics, nothing trained again

    (resumed,) = rope().glob("metrics.json")
    (uninterrupted,) = (tmp_path / "plain").rglob("metrics.json")
    assert resumed.relative_to(runs) == uninterrupted.relative_to(tmp_path / "plain")  # the same run folder

    def scores(path):  # what was learned; time/* (minutes of fitting, evaluating) differs by nature
        return {k: v for k, v in json.loads(path.read_text())["metrics"].items() if not k.startswith("time/")}

    assert scores(resumed) == scores(uninterrupted) and len(scores(resumed)) >= 4
    states = [torch.load(p.parent / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
              for p in (resumed, uninterrupted)]  # fmt: skip
    assert states[0]["global_step"] == states[1]["global_step"] == 2 * 18
    for name, value in states[1]["state_dict"].items():
        assert torch.equal(states[0]["state_dict"][name], value), name


# ------------------------------------------------------------ docs/cluster.md
CLUSTER_PAGE = ROOT / "docs" / "cluster.md"


def page_commands() -> list[list[str]]:
    """The words after ``train.py`` of every command in the page's bash blocks (python, srun, torchrun)."""
    blocks = re.findall(r"```bash\n(.*?)```", CLUSTER_PAGE.read_text(), re.S)
    lines = [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    return [shlex.split(line)[shlex.split(line).index("train.py") + 1 :] for line in lines if " train.py " in line]


def first_of_each_sweep(words: list[str]) -> list[str]:
    """A sweep's overrides as one job of it: ``-m`` dropped, every comma list at its first value."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    kept = []
    for override in OverridesParser.create().parse_overrides([w for w in words if w != "-m"]):
        value = next(iter(override.sweep_string_iterator())) if override.is_sweep_override() else None
        kept.append(f"{override.get_key_element()}={value}" if value is not None else override.input_line)
    return kept


@pytest.mark.parametrize("words", page_commands(), ids=lambda w: " ".join(w)[:60])
def test_the_cluster_page_commands_compose(words):
    """Every ``train.py`` command of docs/cluster.md composes with Hydra, its launcher options
    included (``return_hydra_config``): a key that does not exist fails here. A DDP command's
    processes per node and nodes agree with its trainer's, as Lightning checks on the cluster."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(str(ROOT / "configs"), version_base="1.3"):
        cfg = compose("train", overrides=first_of_each_sweep(words), return_hydra_config=True)
    launcher = cfg.hydra.launcher
    if "submitit" in str(launcher.get("_target_")):
        assert cfg.hydra.sweep.dir and launcher.submitit_folder.endswith("/.submitit/%j")
    if "submitit" in str(launcher.get("_target_")):  # the GPU recipe's joblib waves went with their launcher
        assert "n_jobs" not in launcher
    if cfg.trainer.get("strategy") == "ddp" and "SlurmLauncher" in str(launcher.get("_target_")):
        assert (launcher.tasks_per_node, launcher.nodes) == (cfg.trainer.devices, cfg.trainer.num_nodes)
        assert launcher.gpus_per_node == launcher.tasks_per_node  # one process per GPU


def test_the_cluster_page_has_its_commands_and_names_real_launcher_options():
    """The page's SLURM sweep, DDP and dry-run commands are all there, and every option of its
    table is one of the plugin's (``hydra.launcher.<option>``)."""
    from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf

    commands = [" ".join(w) for w in page_commands()]
    assert any("hydra/launcher=vitpos_slurm" in c and "trainer.num_nodes=2" not in c for c in commands)
    assert any("hydra/launcher=vitpos_slurm" in c and "trainer.num_nodes=2" in c for c in commands)
    assert any("hydra/launcher=vitpos_local" in c for c in commands)
    assert not any("hydra/launcher=submitit_" in c for c in commands)  # the plugin's own: no killed job reported
    table = re.findall(r"^\| `(\w+)` \|", CLUSTER_PAGE.read_text(), re.M)
    assert "partition" in table and "array_parallelism" in table
    assert set(table) <= set(SlurmQueueConf.__dataclass_fields__), set(table) - set(SlurmQueueConf.__dataclass_fields__)


@pytest.mark.slow
def test_a_sweep_rerun_in_the_same_folder_reports_the_new_outcome_not_the_old_one(tmp_path):
    """Resubmitting into the first sweep's folder (``hydra.sweep.dir=``, docs/cluster.md) replaces
    a job's ``error.log`` of the earlier attempt: a job that now finishes is not listed as failed.
    The first attempt fails as its job starts: another process holds the run folder."""
    sweep, runs = tmp_path / "multirun", tmp_path / "runs"
    job = ["data=shapes", "model=vit_micro", "debug=fast", "encoding=rope_2d"]
    common = ["-m", *job, f"run.root={runs}", f"hydra.sweep.dir={sweep}"]
    sleeper = held_run_folder(runs, *job)
    try:
        first = run_command("train.py", *common, cwd=tmp_path)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert first.code == 1 and f"sweep {sweep}: 1 job, 1 failed, 0 missing, 0 finished" in first.out, first.out
    again = run_command("train.py", *common, cwd=tmp_path)  # the holder is gone: its lock is taken over
    assert again.code == 0, again.out + again.err
    assert f"sweep {sweep}: 1 job, 0 failed, 0 missing, 1 finished" in again.out, again.out
    assert not (sweep / "0" / "error.log").exists() and (sweep / "0" / "outcome.txt").exists()


def test_the_launch_override_is_pinned_to_the_installed_plugins_release():
    """``WaitForEveryJob.launch`` repeats the plugin's executor set-up (the plugin offers no public hook to wait
    for every job): it holds for the release it was read against, and a new release fails here, by version and
    by the source of the method it repeats, until the override is read again."""
    import hashlib
    import inspect
    from importlib.metadata import version

    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import BaseSubmititLauncher

    from hydra_plugins.vitpos_submitit.tolerant import PLUGIN_LAUNCH_DIGEST, PLUGIN_VERSION

    assert version("hydra-submitit-launcher") == PLUGIN_VERSION
    digest = hashlib.sha256(inspect.getsource(BaseSubmititLauncher.launch).encode()).hexdigest()[:16]
    assert digest == PLUGIN_LAUNCH_DIGEST, "the plugin's launch changed: compare WaitForEveryJob.launch with it"
