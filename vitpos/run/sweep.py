"""Sweeps (``python train.py -m ...``) that report every job and survive a failed one.

A job that fails (bad input, divergence, a crash) writes its one-line error to
``<job folder>/error.log`` (a finished job: its result in ``outcome.txt``) (``multirun/<date>/<time>/<n>/``), which
``python -m vitpos.compare multirun=...`` lists, and the sweep goes on to the
next job. :class:`SweepReport`, a Hydra callback (``configs/train.yaml``:
``hydra.callbacks``), prints one line per job as it starts and ends (its
overrides, minutes, ``test/acc``) and a summary at the end; ``train.py`` then
exits with code 1 when any job failed.

Bad options are no failed jobs: the sweep (``hydra/sweeper=vitpos``, hydra_plugins/vitpos_sweeper)
composes and checks every job before it launches any, and refuses the whole sweep with one line
(:func:`refuse`), exit code 2, nothing written. The job folders of a sweep are its own: the sweep holds
``<hydra.sweep.dir>/.lock`` while it runs, so a second sweep into the same folder is refused instead
of reading the first one's job outcomes as its own.

A SIGINT (Ctrl-C) or SIGTERM is no failure: it stops the whole sweep (or a single run)
within seconds, in any phase, and the same command resumes it (:mod:`vitpos.run.signals`,
installed by :class:`SweepReport` while ``train.py``'s app runs).

What a full comparison sweeps: :func:`image_encodings`, every built-in image encoding, derived from
the registry; ``configs/sweep/image_encodings.yaml`` reads it through the resolver
``${vitpos_image_encodings:}`` (:func:`register_resolver`), so a new encoding file joins every
comparison without a list to edit.
"""

from __future__ import annotations

import copy
import math
import sys
import time
from pathlib import Path
from typing import NoReturn

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from vitpos.run import signals

ERROR_FILE = "error.log"
BASIC_LAUNCHER = "BasicLauncher"  # Hydra's default launcher: every job in this process, one after another
OUTCOME_FILE = "outcome.txt"
_failed: list[str] = []  # jobs that failed in this process's sweep (the callback runs in the main process)
RESOLVER = "vitpos_image_encodings"  # configs/sweep/image_encodings.yaml: encoding: ${vitpos_image_encodings:}
# the order the comparisons have always run their jobs in, frozen so that adding an encoding moves none of
# theirs (a stopped sweep reruns in the same order); an encoding added later runs after them, alphabetically
COMPARED_FIRST = (
    "none", "learned_1d", "learned_2d", "sincos_2d", "rel_bias_2d", "cpe", "rope_2d", "rope_2d_mixed", "alibi_2d",
    "lookhere", "learned_2d_sum", "string_cayley", "string_circulant", "comrope", "liere", "pape", "fire_2d",
    "rope_2d_dinov3", "pape_ri", "rope_2d_golden",
)  # fmt: skip
# image encodings the comparisons leave out: 1D encodings that also run on a flattened grid (learned_1d, which
# stays, stands for "no 2D structure"), and combo, a sum of the others
NOT_COMPARED = ("sincos_1d", "rope_1d", "rope_1d_learned", "combo")


def image_encodings() -> list[str]:
    """The image encodings every full comparison sweeps, in the order its jobs run: every built-in
    encoding that takes a 2D grid (plug-ins never: ``list_encodings`` lists the package's own), but
    :data:`NOT_COMPARED`; :data:`COMPARED_FIRST` first, any other alphabetically after them."""
    from vitpos.encodings import list_encodings  # torch: only when a sweep list is asked for

    images = [name for name in list_encodings(grid_dims=2) if name not in NOT_COMPARED]  # sorted
    first = [name for name in COMPARED_FIRST if name in images]
    return first + [name for name in images if name not in first]


def register_resolver() -> None:
    """Make ``${vitpos_image_encodings:}`` the comma list of :func:`image_encodings` (Hydra's sweeper
    sweeps a comma list) in every config composed after this call: ``train.py`` calls it."""
    OmegaConf.register_new_resolver(RESOLVER, lambda: ",".join(image_encodings()), replace=True)


def name_model(cfg: DictConfig, choices) -> None:
    """``run.model``, where the config leaves it null: the name of the model config chosen
    (``model=vit_micro``, from Hydra's ``runtime.choices``), which names the run folder
    (vitpos/run/identity.py). A job (``train.py``) and the sweep's check of it both call this."""
    if isinstance(cfg.get("run"), DictConfig):
        with open_dict(cfg):
            cfg.run.model = cfg.run.get("model") or choices.get("model")


def job_config(sweep_config: DictConfig) -> DictConfig:
    """The config a job of the sweep runs, from its composed sweep config: as Hydra hands it to
    the job (without the ``hydra`` node), ``run.model`` named (:func:`name_model`)."""
    cfg = copy.deepcopy(sweep_config)
    with read_write(cfg), open_dict(cfg):
        del cfg["hydra"]
    name_model(cfg, sweep_config.hydra.runtime.get("choices") or {})
    return cfg


def refuse(err: BaseException) -> NoReturn:
    """A sweep refused before its first job (a bad option of one job, of the launcher, a sweep folder
    in use): one line ``error: ...`` and exit code 2, as ``train.py`` refuses a single run. Raised from
    inside Hydra's app as a ``SystemExit``, which Hydra hands on instead of printing its report; the
    signal handlers the sweep's callback installed at its start are put back."""
    signals.uninstall()
    _failed.clear()
    print(f"error: {err}", file=sys.stderr)
    raise SystemExit(2)


def record_failure(job_dir: str | Path, err: BaseException) -> str:
    """Write ``error: <message>`` to the job's ``error.log``; returns the line. After a SIGINT or
    SIGTERM the error is the stop's doing (a compiler whose ``g++`` it killed): the sweep stops
    instead (:mod:`vitpos.run.signals`)."""
    if signals.stopping() is not None:
        raise signals.Stopped(signals.stopping())
    line = f"error: {str(err).splitlines()[0] if str(err) else type(err).__name__}"
    path = Path(job_dir)
    path.mkdir(parents=True, exist_ok=True)
    (path / ERROR_FILE).write_text(line + "\n")
    return line


def record_outcome(job_dir: str | Path, metrics: dict[str, float], run_folder: Path) -> None:
    """Write the job's result line (``test/acc``, run folder) for the end-of-job line."""
    acc = metrics.get("test/acc", math.nan)
    (Path(job_dir) / OUTCOME_FILE).write_text(f"test/acc {acc:.4f} ({run_folder})\n")


def job_name(config) -> str:
    overrides = config.hydra.overrides.task
    return " ".join(str(o) for o in overrides) or "(no overrides)"


def say(line: str) -> None:
    """One whole line at once, so lines of jobs running side by side never mix."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class SweepReport(Callback):
    """Per-job start/end lines and the sweep's summary (see the module docstring)."""

    def __init__(self) -> None:
        self.start: dict[int, float] = {}

    def on_multirun_start(self, config, **kwargs) -> None:
        _failed.clear()  # a new sweep: an earlier one in this process (train.py's main called twice) is not this one
        signals.install(owner=True, jobs_elsewhere=not str(config.hydra.launcher._target_).endswith(BASIC_LAUNCHER))

    def on_run_start(self, config, **kwargs) -> None:
        _failed.clear()  # a single run after a sweep in the same process reports its own outcome only
        signals.install(owner=True)

    def on_run_end(self, config, **kwargs) -> None:
        signals.uninstall()

    def on_job_start(self, config, **kwargs) -> None:
        signals.install()  # in a joblib worker: its own handler (the main process's does not reach here)
        if signals.stopping() is not None:  # no new job after a stop
            raise signals.Stopped(signals.stopping())
        if config.hydra.mode is None or str(config.hydra.mode) != "RunMode.MULTIRUN":
            return
        self.start[config.hydra.job.num] = time.perf_counter()
        for name in (ERROR_FILE, OUTCOME_FILE):  # a sweep rerun in the same folder: the last attempt's are stale
            (Path(config.hydra.runtime.output_dir) / name).unlink(missing_ok=True)
        say(f"[job {config.hydra.job.num}] start: {job_name(config)}")

    def on_job_end(self, config, job_return, **kwargs) -> None:
        if str(config.hydra.mode) != "RunMode.MULTIRUN":
            return
        num = config.hydra.job.num
        minutes = (time.perf_counter() - self.start.pop(num, time.perf_counter())) / 60
        folder = Path(config.hydra.runtime.output_dir)
        outcome = "done"
        for name in (ERROR_FILE, OUTCOME_FILE):
            if (folder / name).exists():
                outcome = (folder / name).read_text().strip()
                break
        say(f"[job {num}] end after {minutes:.1f} min: {outcome}")

    def on_multirun_end(self, config, **kwargs) -> None:
        signals.uninstall()
        sweep = Path(config.hydra.sweep.dir)
        jobs = sorted(p for p in sweep.iterdir() if p.is_dir() and p.name.isdigit()) if sweep.is_dir() else []
        failed = [p for p in jobs if (p / ERROR_FILE).exists()]
        # neither file: the job's process ended without a word (killed, preempted) or never ran
        missing = [p for p in jobs if not (p / ERROR_FILE).exists() and not (p / OUTCOME_FILE).exists()]
        _failed[:] = [f"failed: {p}: {(p / ERROR_FILE).read_text().strip()}" for p in failed]
        _failed.extend(f"missing: {p}: no result (killed or preempted: rerun the sweep to resume it)" for p in missing)
        finished = len(jobs) - len(failed) - len(missing)
        counted = f"{len(jobs)} job{'s' * (len(jobs) != 1)}"
        say(f"sweep {sweep}: {counted}, {len(failed)} failed, {len(missing)} missing, {finished} finished")
        for line in _failed:
            say(f"  {line}")
        limit = config.hydra.launcher.get("timeout_min")  # submitit's: a job still running then is killed
        if missing and limit is not None:
            say(f"  a missing job may have run out of time: hydra.launcher.timeout_min={limit} (minutes; raise it)")
        if (sweep / ".submitit").is_dir():  # submitit launchers: every job printed into its own log there
            say(f"  job logs: {sweep}/.submitit/<job id>/")
        if jobs:
            say(f"  python -m vitpos.compare {runs_option(config)}multirun=[{sweep}]")


def runs_option(config) -> str:
    """``runs=<run.root>/<run.group> `` of the sweep's config when its jobs share one group (an
    experiment's sweep), else ``runs=<run.root> ``: a command that runs as printed."""
    run = config.get("run") or {}
    root, group = run.get("root", "runs"), run.get("group")
    return f"runs={root}/{group} " if group else f"runs={root} "


def sweep_failed() -> bool:
    """Whether the sweep this process just ran had a failed (or missing) job."""
    return bool(_failed)
