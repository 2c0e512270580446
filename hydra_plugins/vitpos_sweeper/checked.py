"""``hydra/sweeper=vitpos``: the jobs of Hydra's basic sweeper, every one composed and checked before any is launched.

Hydra's basic sweeper composes each batch just before launching it, so a job the config check refuses ran and failed
while the sweep went on. Here the first problem refuses the whole sweep in one line, exit 2, nothing written; then the
sweep holds ``<hydra.sweep.dir>/.lock`` (two sweeps in one folder read each other's outcomes) and launches in batches.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.core.plugins import Plugins
from hydra.errors import HydraException
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from vitpos import CONFIG_DIR
from vitpos.checks.options import check_launcher
from vitpos.cli.hydra_errors import override_error
from vitpos.errors import InputError, UserError
from vitpos.run import folder, sweep
from vitpos.validate import validate

log = logging.getLogger(__name__)
IN_USE_FIX = "wait for it to finish, or give this sweep a folder of its own: hydra.sweep.dir=<folder>"


def job_overrides(overrides: list[Override]) -> list[list[str]]:
    """The overrides of each job in launch order, as Hydra's basic sweeper makes them: the cartesian product of the
    sweeps, the first key the outer loop (a key given twice: its first place, its last value)."""
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


class CheckedSweeper(Sweeper):
    """``params``: ``hydra.sweeper.params``, swept before the command line's overrides, as the basic sweeper does."""

    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None) -> None:
        super().__init__()
        self.max_batch_size, self.params = max_batch_size, params or {}

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context = config, hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        try:
            check_launcher(self.config.hydra.launcher)
            jobs = self.checked_jobs([f"{key}={value}" for key, value in self.params.items()] + list(arguments))
            sweep_dir.mkdir(parents=True, exist_ok=True)
            folder.acquire(sweep_dir, "hydra.sweep.dir", IN_USE_FIX, "train.py -m")
        except InputError as err:
            sweep.refuse(err)
        except OSError as err:  # a read-only or full disk: one line naming the folder
            sweep.refuse(folder.disk_fault(err, sweep_dir) or err)
        try:
            OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
            size, returns = self.max_batch_size if (self.max_batch_size or 0) > 0 else max(len(jobs), 1), []
            for first in range(0, len(jobs), size):  # batches of at most max_batch_size jobs (None: all at once)
                results = self.launcher.launch(jobs[first : first + size], initial_job_idx=first)
                for result in results:
                    _ = result.return_value  # raises what a job raised, as Hydra's basic sweeper does
                returns.append(results)
            return returns
        finally:
            folder.release(sweep_dir)

    def checked_jobs(self, words: list[str]) -> list[list[str]]:
        """Each job's overrides (``hydra.sweeper.params``, then the command line's), each job composed as its launcher
        will and its config checked."""
        loader = self.hydra_context.config_loader
        try:
            jobs = job_overrides(OverridesParser.create(config_loader=loader).parse_overrides(words))
        except HydraException as err:  # a value the grammar cannot read, a glob of no group
            raise override_error(err, CONFIG_DIR, words) from None
        for job in jobs:
            try:
                config = loader.load_sweep_config(self.config, list(job))
            except (HydraException, ValueError) as err:  # ValueError: a config group set to null (optim=null)
                raise override_error(err, CONFIG_DIR, job) from None
            validate(sweep.job_config(config))
            log.debug("checked: %s", " ".join(job))
        return jobs
