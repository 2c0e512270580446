"""Sweeps (``python train.py -m ...``) that report every job and survive a failed one.

A failed job writes its one-line error to ``<job folder>/error.log`` (a finished one ``outcome.txt``) and the sweep
goes on; :class:`SweepReport` prints a line per job start and end and a summary, and ``train.py`` exits 1 if a job
failed. Bad options fail no job: the sweep is refused first (:func:`refuse`).
"""

from __future__ import annotations

import copy
import os
import sys
import time
from pathlib import Path
from typing import NoReturn

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from vitpos.run import signals

ERROR_FILE = "error.log"
OUTCOME_FILE = "outcome.txt"
_failed: list[str] = []  # failed jobs of this process's sweep (the callback runs in the main process)
_refused = False  # refuse() ended this process's command: no sweep summary
# frozen job order, so a new encoding (run after these, alphabetically) shifts no job of a stopped sweep
COMPARED_FIRST = (
    "none", "learned_1d", "learned_2d", "sincos_2d", "rel_bias_2d", "cpe", "rope_2d", "rope_2d_mixed", "alibi_2d",
    "lookhere", "learned_2d_sum", "string_cayley", "string_circulant", "comrope", "liere", "pape", "fire_2d",
    "rope_2d_dinov3", "pape_ri", "rope_2d_golden",
)  # fmt: skip
# left out: 1D encodings on a flattened grid (learned_1d stays, for "no 2D structure") and combo (a sum of others)
NOT_COMPARED = ("sincos_1d", "rope_1d", "rope_1d_learned", "combo")


def image_encodings() -> list[str]:
    """Built-in 2D encodings (no plug-ins) but :data:`NOT_COMPARED`; :data:`COMPARED_FIRST` first, the rest sorted."""
    from vitpos.encodings import list_encodings  # imports torch: only on demand

    images = [name for name in list_encodings(grid_dims=2) if name not in NOT_COMPARED]  # sorted
    first = [name for name in COMPARED_FIRST if name in images]
    return first + [name for name in images if name not in first]


def add_resolver(name: str, resolver) -> None:
    """``${name:}`` in a config calls ``resolver``: OmegaConf 2.4's ``register_resolver``, which 2.3 calls
    ``register_new_resolver`` (2.3's ``register_resolver`` is an older kind)."""
    current = hasattr(OmegaConf, "legacy_register_resolver")  # 2.4 and later
    (OmegaConf.register_resolver if current else OmegaConf.register_new_resolver)(name, resolver, replace=True)


def register_resolver() -> None:
    """``${vitpos_image_encodings:}``: :func:`image_encodings` as a comma list (a Hydra sweep)."""
    add_resolver("vitpos_image_encodings", lambda: ",".join(image_encodings()))


def name_model(cfg: DictConfig, choices) -> None:
    """Fill a null ``run.model`` with the chosen model config's name, which names the run folder."""
    if isinstance(cfg.get("run"), DictConfig):
        with open_dict(cfg):
            cfg.run.model = cfg.run.get("model") or choices.get("model")


def job_config(sweep_config: DictConfig) -> DictConfig:
    """The config Hydra hands a job: ``sweep_config`` without ``hydra``, with ``run.model`` named."""
    cfg = copy.deepcopy(sweep_config)
    with read_write(cfg), open_dict(cfg):
        del cfg["hydra"]
    name_model(cfg, sweep_config.hydra.runtime.get("choices") or {})
    return cfg


#: set, Hydra raises a config it cannot compose (train.py words it in one line, exit 2); unset once composed
FULL_ERROR = "HYDRA_FULL_ERROR"
_raising = False  # raise_composition_errors set FULL_ERROR and the config has not composed yet


def raise_composition_errors() -> bool:
    """Set :data:`FULL_ERROR` until :func:`composed`; False (nothing set) where the user set it already."""
    global _raising
    _raising = FULL_ERROR not in os.environ
    os.environ.setdefault(FULL_ERROR, "1")
    return _raising


def composing() -> bool:
    """Whether Hydra is still composing the command's config."""
    return _raising


def composed() -> None:
    """The command's config composed: unset what :func:`raise_composition_errors` set."""
    global _raising
    if _raising:
        os.environ.pop(FULL_ERROR, None)
        _raising = False


def refuse(err: BaseException) -> NoReturn:
    """Refuse the command: ``error: ...``, exit 2, as a ``SystemExit`` Hydra passes on without its own report."""
    global _refused
    signals.uninstall()
    _failed.clear()
    _refused = True
    print(f"error: {err}", file=sys.stderr)
    raise SystemExit(2)


def record_failure(job_dir: str | Path, err: BaseException) -> str:
    """Write ``error: <first line>`` to the job's ``error.log`` and return it; after a stop, stop instead."""
    signals.raise_if_stopped()
    line = f"error: {str(err).splitlines()[0] if str(err) else type(err).__name__}"
    Path(job_dir).mkdir(parents=True, exist_ok=True)
    (Path(job_dir) / ERROR_FILE).write_text(line + "\n")
    return line


def record_outcome(job_dir: str | Path, metrics: dict[str, float], run_folder: Path) -> None:
    """Write ``test/acc <value> (<run folder>)`` to the job's ``outcome.txt``: the job finished."""
    (Path(job_dir) / OUTCOME_FILE).write_text(f"test/acc {metrics.get('test/acc', float('nan')):.4f} ({run_folder})\n")


def in_sweep(hydra) -> bool:
    """Whether the job of the ``hydra`` config is one of a sweep's (``-m``)."""
    return str(hydra.mode) == "RunMode.MULTIRUN"


def say(line: str) -> None:
    """Write a whole line at once, so parallel jobs' lines never mix."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def sweep_failed() -> bool:
    """Whether the sweep this process just ran had a failed (or missing) job."""
    return bool(_failed)


class SweepReport(Callback):
    """Per-job start/end lines and the sweep's summary; installs the stop handler (:mod:`vitpos.run.signals`)."""

    def __init__(self) -> None:
        self.start: dict[int, float] = {}

    def on_multirun_start(self, config, **kwargs) -> None:  # Hydra's BasicLauncher runs the jobs in this process
        from vitpos.checks.options import check_launcher
        from vitpos.errors import InputError

        try:
            check_launcher(config.hydra.launcher)  # before Hydra builds the launcher from it
        except InputError as err:
            refuse(err)
        self.on_run_start(config, jobs_elsewhere=not str(config.hydra.launcher._target_).endswith("BasicLauncher"))

    def on_run_start(self, config, jobs_elsewhere: bool = False, **kwargs) -> None:
        global _refused
        _refused = False
        composed()  # a sweep's config: the sweeper words a job's composition error itself
        _failed.clear()  # a run or sweep reports only its own outcome
        signals.install(owner=True, jobs_elsewhere=jobs_elsewhere)

    def on_run_end(self, config, **kwargs) -> None:
        global _refused
        signals.uninstall()
        _refused = False

    def on_job_start(self, config, **kwargs) -> None:
        signals.install()  # a joblib worker needs its own handler
        signals.raise_if_stopped()  # no new job after a stop
        signals.job_running(True)
        if in_sweep(config.hydra):
            self.start[config.hydra.job.num] = time.perf_counter()
            for name in (ERROR_FILE, OUTCOME_FILE):  # left by an earlier attempt: stale
                (Path(config.hydra.runtime.output_dir) / name).unlink(missing_ok=True)
            overrides = " ".join(str(o) for o in config.hydra.overrides.task) or "(no overrides)"
            say(f"[job {config.hydra.job.num}] start: {overrides}")

    def on_job_end(self, config, job_return, **kwargs) -> None:
        signals.job_running(False)
        if in_sweep(config.hydra):
            num, folder = config.hydra.job.num, Path(config.hydra.runtime.output_dir)
            minutes = (time.perf_counter() - self.start.pop(num, time.perf_counter())) / 60
            found = [folder / name for name in (ERROR_FILE, OUTCOME_FILE) if (folder / name).exists()]
            say(f"[job {num}] end after {minutes:.1f} min: {found[0].read_text().strip() if found else 'done'}")

    def on_multirun_end(self, config, **kwargs) -> None:
        global _refused
        signals.uninstall()
        if _refused:  # Hydra 1.4 ends a refused sweep here too: it ran no job
            _refused = False
            return
        sweep = Path(config.hydra.sweep.dir)
        jobs = sorted(p for p in sweep.iterdir() if p.is_dir() and p.name.isdigit()) if sweep.is_dir() else []
        failed = [p for p in jobs if (p / ERROR_FILE).exists()]
        missing = [p for p in jobs if p not in failed and not (p / OUTCOME_FILE).exists()]  # killed or never ran
        _failed[:] = [f"failed: {p}: {(p / ERROR_FILE).read_text().strip()}" for p in failed]
        _failed.extend(f"missing: {p}: no result (killed or preempted: rerun the sweep to resume it)" for p in missing)
        counted = f"{len(jobs)} job{'s' * (len(jobs) != 1)}"
        finished = len(jobs) - len(failed) - len(missing)
        say(f"sweep {sweep}: {counted}, {len(failed)} failed, {len(missing)} missing, {finished} finished")
        for line in _failed:
            say(f"  {line}")
        if missing and (limit := config.hydra.launcher.get("timeout_min")) is not None:  # submitit kills jobs past it
            say(f"  a missing job may have run out of time: hydra.launcher.timeout_min={limit} (minutes; raise it)")
        if (sweep / ".submitit").is_dir():
            say(f"  job logs: {sweep}/.submitit/<job id>/")
        if jobs:  # runs=<run.root>/<run.group> when the sweep's jobs share a group
            run = config.get("run") or {}
            runs = f"{run.get('root', 'runs')}/{run['group']}" if run.get("group") else run.get("root", "runs")
            say(f"  python -m vitpos.compare runs={runs} multirun=[{sweep}]")
