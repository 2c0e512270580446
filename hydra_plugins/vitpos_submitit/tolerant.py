"""``hydra/launcher=vitpos_slurm`` and ``vitpos_local``: the ``hydra-submitit-launcher`` plugin's ``submitit_slurm``
and ``submitit_local``, same options, waiting for every job of a sweep.

The plugin raises at the first job that ended without a result (SIGKILL, preemption, a time limit) while others may
still run. Here such a job is *missing* (its folder made, so the summary lists it and the same command resumes it), or
*failed* with ``error.log`` where its process raised outside the training.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra.plugins.launcher import Launcher

try:
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher, SlurmLauncher
except ImportError:  # the plugin is optional (pip install -e ".[cluster]"); without it there is nothing to extend
    LocalLauncher = SlurmLauncher = None

#: the plugin release whose ``BaseSubmititLauncher.launch`` :meth:`WaitForEveryJob.launch` repeats, and the SHA-256
#: (16 hex digits) of that method's source: the tests fail on any other, so an upgrade is read against this override
PLUGIN_VERSION, PLUGIN_LAUNCH_DIGEST = "1.2.0", "546875669010f80d"
JOBS_AT_ONCE = "VITPOS_JOBS_AT_ONCE"  # read by vitpos.runtime.sweep_jobs in every job of vitpos_local
log = logging.getLogger(__name__)


def wait_for_every_job(jobs, first_num: int, sweep_dir: Path) -> list[JobReturn]:
    """Each job's JobReturn in order; a job that ended without one gets an empty, completed one."""
    from submitit.core.utils import FailedJobError, UncompletedJobError

    returns = []
    for num, job in enumerate(jobs, start=first_num):
        try:
            returns.append(job.results()[0])
        except UncompletedJobError as err:  # killed, preempted, out of time: no word from the job
            (sweep_dir / str(num)).mkdir(parents=True, exist_ok=True)
            if isinstance(err, FailedJobError):  # (a subclass) it raised outside train.py's own handling
                problem = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
                (sweep_dir / str(num) / "error.log").write_text(f"error: {problem}\n")
            returns.append(JobReturn(status=JobStatus.COMPLETED))  # its return value: None
    return returns


class WaitForEveryJob:
    """The plugin's ``launch`` (its executor set-up repeated: it keeps its jobs to itself), then
    :func:`wait_for_every_job`."""

    def launch(self, job_overrides, initial_job_idx):
        import submitit  # here, not at the top: Hydra imports this module at every plugin scan

        init = {"max_num_timeout"}  # the plugin's: an argument of the executor, the rest are parameters
        shared = {field.name for field in dataclasses.fields(BaseQueueConf)}  # every executor's: no prefix
        executor = submitit.AutoExecutor(
            cluster=self._EXECUTOR,
            folder=self.params["submitit_folder"],
            **{f"{self._EXECUTOR}_{k}": v for k, v in self.params.items() if k in init},
        )
        executor.update_parameters(**{
            k if k in shared else f"{self._EXECUTOR}_{k}": v
            for k, v in self.params.items() if k not in init | {"submitit_folder"}
        })  # fmt: skip
        log.info(f"Submitit '{self._EXECUTOR}' sweep output dir : {self.config.hydra.sweep.dir}")
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if "mode" in self.config.hydra.sweep:
            os.chmod(sweep_dir, mode=int(str(self.config.hydra.sweep.mode), 8))
        nums = range(initial_job_idx, initial_job_idx + len(job_overrides))
        for num, overrides in zip(nums, job_overrides):
            log.info(f"\t#{num} : {' '.join(filter_overrides(overrides))}")
        args = [(list(o), "hydra.sweep.dir", n, f"job_id_for_{n}", Singleton.get_state())
                for n, o in zip(nums, job_overrides)]  # fmt: skip
        self.jobs_at_once = len(job_overrides)  # pickled with the launcher: every job's process sees it
        jobs = executor.map_array(self, *zip(*args))
        return wait_for_every_job(jobs, initial_job_idx, sweep_dir)


if LocalLauncher is not None:

    class TolerantLocalLauncher(WaitForEveryJob, LocalLauncher):
        """``hydra/launcher=vitpos_local``: ``submitit_local``, waiting for every job."""

        def __call__(self, *args, **kwargs):  # one job, in its own process (submitit unpickles this launcher there)
            os.environ[JOBS_AT_ONCE] = str(self.jobs_at_once)
            return super().__call__(*args, **kwargs)

    class TolerantSlurmLauncher(WaitForEveryJob, SlurmLauncher):
        """``hydra/launcher=vitpos_slurm``: ``submitit_slurm``, waiting for every job."""

else:  # the entry points (pyproject.toml) load all the same; the launcher configs need the plugin first

    class PluginMissing(Launcher):
        """Without ``hydra-submitit-launcher``: says what to install."""

        def setup(self, **kwargs) -> None:
            raise ImportError('hydra/launcher=vitpos_local and vitpos_slurm need pip install -e ".[cluster]"')

        def launch(self, job_overrides, initial_job_idx):
            raise NotImplementedError

    TolerantLocalLauncher = TolerantSlurmLauncher = PluginMissing
