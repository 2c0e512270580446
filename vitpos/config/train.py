"""Options outside the groups' schemas: ``configs/train.yaml``'s own keys, a key the run writes, a sweep's launcher.

Declared for their rules, help and part in the run's identity, not registered in the ConfigStore (the primary config,
the run and the launcher hold these keys). ``threads``, ``resume`` and ``run.*`` have rules of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vitpos.config.rules import IMAGE, Given, Int, option


@dataclass
class TopLevel:
    """``configs/train.yaml``'s keys with a plain rule."""

    seed: Any = option(0, rule=Int(0, minimum=0, maximum=2**32 - 1, help="the run's seed"))  # seed_everything's range


@dataclass
class WrittenModel:
    """What a run adds to ``model``: a timm model's geometry (:mod:`vitpos.tasks.classification`)."""

    geometry: Any = option(None, rule=Given("written by the run", task=IMAGE, defines=False,
                                            help="a timm model's patch, width, depth"))  # fmt: skip


@dataclass
class Launcher:
    """A sweep's ``hydra.launcher.*`` options (joblib's, submitit's) with a rule, checked before any job starts
    where the chosen launcher has them (``timeout_min=0`` would kill every job); their values are the launcher's."""

    timeout_min: Any = option(None, rule=Int(60, help="submitit: minutes a job may run before it is killed"))
    cpus_per_task: Any = option(None, rule=Int(4, null=True, help="submitit: CPU cores of each job's task"))
    gpus_per_node: Any = option(None, rule=Int(1, minimum=0, null=True, help="submitit: GPUs of each job's node"))
    tasks_per_node: Any = option(None, rule=Int(1, help="submitit: processes per node (DDP: one per GPU)"))
    nodes: Any = option(None, rule=Int(1, help="submitit: nodes of each job"))
    mem_gb: Any = option(None, rule=Int(16, null=True, help="submitit: memory of each job's node, GB"))
    array_parallelism: Any = option(None, rule=Int(256, help="submitit_slurm: jobs of the sweep running at once"))
    n_jobs: Any = option(None, rule=Int(2, also=(-1,), help="joblib: jobs side by side in worker processes; -1: "
                                        "one per core"))  # fmt: skip
