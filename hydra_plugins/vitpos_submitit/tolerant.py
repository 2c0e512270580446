"""Hydra's submitit launchers (``hydra/launcher=submitit_local`` and ``submitit_slurm``, from
Facebook Research's ``hydra-submitit-launcher``) made to wait for every job of a sweep.

The plugin collects its jobs' results in order with ``job.results()``, which raises for a job
whose process ended without a result (SIGKILL, a preempted or failed node, a wall-time limit):
the launching process then stops at the first such job, with submitit's traceback, while the
others may still be running, and nothing reports them. A sweep of thousands of jobs must not need
a person at the terminal. These subclasses submit exactly as the plugin does, then wait for
every job:

- a job that ends without a result is *missing*: its folder ``<sweep>/<n>/`` is made if the job
  never started, so the sweep's summary (:mod:`vitpos.run.sweep`) lists it as missing, and
  rerunning the same command resumes it from its ``last.ckpt``;
- a job whose process raised outside the training (submitit's ``FailedJobError``) is *failed*:
  its first line goes to ``<sweep>/<n>/error.log``, like every other failed job's.

The jobs' own failures (bad input, a crash in training) are already caught and recorded inside
the job (``train.py``); this only covers the processes that die. ``submitit_local`` also tells its
jobs how many run at once (``VITPOS_JOBS_AT_ONCE``), so ``threads=auto`` gives each a share of
the cores, as with the joblib launcher.

:class:`vitpos.run.sweep.SweepReport` puts these classes in place of the plugin's when a sweep
starts: the user keeps writing ``hydra/launcher=submitit_slurm``. Hydra loads a launcher class
only from the ``hydra_plugins`` package, hence this package.
"""

from __future__ import annotations

import os
from pathlib import Path

from hydra.core.utils import JobReturn, JobStatus

try:
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher, SlurmLauncher
except ImportError:  # the plugin is optional (pip install -e ".[cluster]"); without it there is nothing to wrap
    LocalLauncher = SlurmLauncher = None

JOBS_AT_ONCE = "VITPOS_JOBS_AT_ONCE"  # read by vitpos.runtime.sweep_jobs in every job of submitit_local


def wait_for_every_job(jobs, first_num: int, sweep_dir: Path) -> list[JobReturn]:
    """Each job's JobReturn in order; a job that ended without one gets an empty, completed one
    and leaves its folder behind as missing (or failed, with ``error.log``)."""
    from submitit.core.utils import FailedJobError, UncompletedJobError

    returns = []
    for num, job in enumerate(jobs, start=first_num):
        try:
            returns.append(job.results()[0])
            continue
        except FailedJobError as err:  # (a subclass of the next) the job raised outside train.py's own handling
            problem = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        except UncompletedJobError:  # killed, preempted, out of time: no word from the job
            problem = None
        folder = sweep_dir / str(num)
        folder.mkdir(parents=True, exist_ok=True)
        if problem is not None:
            (folder / "error.log").write_text(f"error: {problem}\n")
        empty = JobReturn()
        empty.status, empty.return_value = JobStatus.COMPLETED, None
        returns.append(empty)
    return returns


class WaitForEveryJob:
    """The plugin's ``launch``, with its results collected by :func:`wait_for_every_job`."""

    def launch(self, job_overrides, initial_job_idx):
        from unittest import mock  # here, not at the top: Hydra imports this module at every plugin scan

        import submitit

        submitted = []
        submit = submitit.AutoExecutor.map_array

        def keep_the_jobs(executor, fn, *iterables):
            submitted.extend(submit(executor, fn, *iterables))
            return []  # the plugin's own loop over results (which stops at the first dead job) sees none

        # submitit_local starts every job at once on this machine: each takes its share of the cores
        shares = {JOBS_AT_ONCE: str(len(job_overrides))} if self._EXECUTOR == "local" else {}
        with mock.patch.object(submitit.AutoExecutor, "map_array", keep_the_jobs), mock.patch.dict(os.environ, shares):
            super().launch(job_overrides, initial_job_idx)
        return wait_for_every_job(submitted, initial_job_idx, Path(str(self.config.hydra.sweep.dir)))


if LocalLauncher is not None:

    class TolerantLocalLauncher(WaitForEveryJob, LocalLauncher):
        """``hydra/launcher=submitit_local``, waiting for every job."""

    class TolerantSlurmLauncher(WaitForEveryJob, SlurmLauncher):
        """``hydra/launcher=submitit_slurm``, waiting for every job."""

    TOLERANT = {  # the plugin's class (its config's _target_) -> the one put in its place
        f"{cls.__module__}.{cls.__name__}": f"{__name__}.{tolerant.__name__}"
        for cls, tolerant in ((LocalLauncher, TolerantLocalLauncher), (SlurmLauncher, TolerantSlurmLauncher))
    }
else:
    TOLERANT = {}
