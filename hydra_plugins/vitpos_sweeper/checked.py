"""``hydra/sweeper=vitpos``: the jobs of Hydra's basic sweeper, every one composed and checked
before any is launched.

Hydra's basic sweeper composes each batch of jobs just before it launches it and checks nothing
but the composition: a job whose options the config check refuses (``vitpos.validate``: an
encoding for sequences in an image sweep, a width its heads cannot split) ran, failed, and the
sweep went on; a launcher option out of range (``hydra.launcher.timeout_min=0``,
``cpus_per_task=-1``) reached the launcher as given. :class:`CheckedSweeper` makes the same jobs,
in the same order, with Hydra's public override API (:func:`job_overrides`), and before it writes
anything:

1. checks the launcher's options (:func:`vitpos.checks.options.check_launcher`);
2. composes every job with the config loader Hydra hands every sweeper (``load_sweep_config``,
   as the launcher will) and runs the config check on it (``vitpos.validate.validate``, on the
   config the job gets: :func:`vitpos.run.sweep.job_config`).

The first problem refuses the whole sweep with one line ``error: <option>: <what> (<fix>)`` and
exit code 2 (:func:`vitpos.run.sweep.refuse`): no ``multirun.yaml``, no job folder. Then it takes
``<hydra.sweep.dir>/.lock`` (:func:`vitpos.run.folder.acquire`): the job folders there are this
sweep's while it runs, and a second sweep into the same folder is refused with a line naming
``hydra.sweep.dir`` (two sweeps sharing the job folders read each other's outcomes, each
reporting the other's refused jobs as its own). It writes ``multirun.yaml`` and hands the jobs to
the configured launcher (basic, joblib, ``vitpos_local``, ``vitpos_slurm``), in batches of
``max_batch_size``.

Every job is composed twice: once here, once by the launcher (a launcher takes overrides, not
configs). Hydra's basic sweeper composed each job twice too. Hydra loads a sweeper class only
from the ``hydra_plugins`` package, hence this package.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.core.plugins import Plugins
from hydra.errors import HydraException
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from vitpos.checks.options import check_launcher
from vitpos.cli.hydra_errors import override_error
from vitpos.errors import InputError, UserError
from vitpos.run import folder, sweep
from vitpos.validate import validate

log = logging.getLogger(__name__)
IN_USE_FIX = "wait for it to finish, or give this sweep a folder of its own: hydra.sweep.dir=<folder>"


def job_overrides(overrides: list[Override]) -> list[list[str]]:
    """The overrides of each job, in launch order: the cartesian product of the sweeps (comma lists,
    ``range``, ``choice``, ``glob``), the first key the outer loop, as Hydra's basic sweeper makes
    them. A key given twice keeps its first place and its last value; a sweep that names no values
    (``interval(0,1)``, for optimising sweepers) is refused."""
    values: dict[str, list[str]] = {}
    for override in overrides:
        key = override.get_key_element()
        if not override.is_sweep_override():
            values[key] = [f"{key}={override.get_value_element_as_str()}"]
        elif override.is_discrete_sweep():
            values[key] = [f"{key}={value}" for value in override.sweep_string_iterator()]
        else:
            fix = f"give the values: {key}=a,b, range(start,stop,step) or choice(a,b)"
            raise UserError(key, f"{override.input_line.partition('=')[2]} names no jobs to run", fix)
    return [list(job) for job in itertools.product(*values.values())]


def batches(jobs: list[list[str]], size: int | None) -> Iterator[tuple[int, list[list[str]]]]:
    """``(number of the first job, jobs)`` of each batch of at most ``size`` jobs (None: all at once)."""
    step = size if size and size > 0 else max(len(jobs), 1)
    for first in range(0, len(jobs), step):
        yield first, jobs[first : first + step]


def config_dir(config: DictConfig) -> Path:
    """The app's config folder (``configs/``), where :func:`vitpos.cli.override_error` finds a
    group's options."""
    for source in config.hydra.runtime.get("config_sources") or []:
        if source.get("provider") == "main" and source.get("schema") == "file":
            return Path(str(source.path))
    return Path("configs")


class CheckedSweeper(Sweeper):
    """``hydra/sweeper=vitpos`` (see the module docstring); ``params``: ``hydra.sweeper.params``,
    swept before the command line's overrides, as Hydra's basic sweeper sweeps them."""

    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None) -> None:
        super().__init__()
        self.max_batch_size = max_batch_size
        self.params = params or {}
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.launcher = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context = config, hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        """Check the launcher and every job, hold the sweep folder, then launch (the module docstring)."""
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        try:
            check_launcher(self.config.hydra.launcher)
            jobs = self.jobs(arguments)
            for job in jobs:
                self.check(job)
            sweep_dir.mkdir(parents=True, exist_ok=True)
            folder.acquire(sweep_dir, "hydra.sweep.dir", IN_USE_FIX, "train.py -m")
        except InputError as err:
            sweep.refuse(err)
        except OSError as err:  # a read-only or full disk: one line naming the folder
            sweep.refuse(folder.disk_fault(err, sweep_dir) or err)
        try:
            OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
            returns = []
            for first, batch in batches(jobs, self.max_batch_size):
                results = self.launcher.launch(batch, initial_job_idx=first)
                for result in results:
                    _ = result.return_value  # raises what a job raised, as Hydra's basic sweeper does
                returns.append(results)
            return returns
        finally:
            folder.release(sweep_dir)

    def jobs(self, arguments: Sequence[str]) -> list[list[str]]:
        """Each job's overrides: ``hydra.sweeper.params``, then the command line's (:func:`job_overrides`)."""
        words = [f"{key}={value}" for key, value in self.params.items()] + list(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        try:
            return job_overrides(parser.parse_overrides(words))
        except HydraException as err:  # a value the grammar cannot read, a glob of no group
            raise override_error(err, config_dir(self.config), words) from None

    def check(self, job: list[str]) -> None:
        """Compose ``job`` as its launcher will and run the config check on it."""
        try:
            config = self.hydra_context.config_loader.load_sweep_config(self.config, list(job))
        except (HydraException, ValueError) as err:  # ValueError: a config group set to null (optim=null)
            raise override_error(err, config_dir(self.config), job) from None
        validate(sweep.job_config(config))
        log.debug("checked: %s", " ".join(job))
