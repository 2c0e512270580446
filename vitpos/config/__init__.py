"""The typed schema of vitpos's config groups, registered in Hydra's ConfigStore on import: each dataclass holds
a group option's keys and defaults, which ``configs/<group>/<name>.yaml`` starts from; struct mode refuses any other
key. Fields are typed ``Any``: a field's rule is its metadata, worded ``error: <option>: ...`` when broken.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

import hydra
from hydra.core.config_store import ConfigStore

from vitpos import CONFIG_DIR
from vitpos.config import data, eval, model, optim, task  # noqa: F401  (each enters its schemas in SCHEMAS)
from vitpos.config.encodings import builtin_options, files_missing
from vitpos.config.rules import IMAGE, SCHEMAS, Given, Int, Spec, option, rules
from vitpos.config.trainer import LightningKeys

#: keywords of ``hydra.main`` and ``initialize_config_dir``: Hydra 1.3 takes ``version_base`` (its 1.3 defaults, as
#: vitpos is written for), which Hydra 1.4 deprecates, keeping those defaults
HYDRA_1_3 = tuple(map(int, re.findall(r"\d+", hydra.__version__)[:2])) < (1, 4)
HYDRA_BASE: dict = {"version_base": "1.3"} if HYDRA_1_3 else {}


@dataclass
class TopLevel:
    """``configs/train.yaml``'s keys with a plain rule."""

    seed: Any = option(0, "the run's seed", Int(0, minimum=0, maximum=2**32 - 1))  # seed_everything's range


@dataclass
class WrittenModel:
    """What a run adds to ``model``: a timm model's geometry (:mod:`vitpos.tasks.classification`)."""

    geometry: Any = option(
        None, "a timm model's patch, width, depth", Given("written by the run", task=IMAGE, defines=False)
    )


@dataclass
class Launcher:
    """A sweep's ``hydra.launcher.*`` options with a rule, checked before any job starts (``timeout_min=0`` would
    kill every job)."""

    timeout_min: Any = option(None, "submitit: minutes a job may run before it is killed", Int(60))
    cpus_per_task: Any = option(None, "submitit: CPU cores of each job's task", Int(4, null=True))
    gpus_per_node: Any = option(None, "submitit: GPUs of each job's node", Int(1, minimum=0, null=True))
    tasks_per_node: Any = option(None, "submitit: processes per node (DDP: one per GPU)", Int(1))
    nodes: Any = option(None, "submitit: nodes of each job", Int(1))
    mem_gb: Any = option(None, "submitit: memory of each job's node, GB", Int(16, null=True))
    array_parallelism: Any = option(None, "submitit_slurm: jobs of the sweep running at once", Int(256))
    n_jobs: Any = option(None, "joblib: jobs side by side in worker processes; -1: one per core", Int(2, also=(-1,)))


#: every option with a rule, ``dotted name -> rule``, in check order (the check, --help, the fuzzer, the run identity)
OPTIONS: dict[str, Spec] = rules(
    [("", TopLevel), *((group, schema) for (group, _), schema in SCHEMAS.items()), ("trainer", LightningKeys),
     ("model", WrittenModel)]
)  # fmt: skip
#: a sweep's ``hydra.launcher.<key>`` options with a rule (:class:`Launcher`)
LAUNCHER: dict[str, Spec] = rules([("", Launcher)])


def register() -> None:
    """Store every schema as ``schema/<group>/<option>``, each built-in encoding's options as
    ``schema/encoding/<name>`` and, without a YAML file, as ``encoding/<name>``. Idempotent."""
    store = ConfigStore.instance()
    for (group, name), schema in SCHEMAS.items():
        store.store(group=f"schema/{group}", name=name, node=schema)
    options = builtin_options()
    for name, values in options.items():  # every option of the class, at its default: overridable without +
        store.store(group="schema/encoding", name=name, node={"name": name, **values})
    for name in files_missing(CONFIG_DIR):
        store.store(group="encoding", name=name, node={"name": name, **options[name]})


def schema_option(schema: type) -> tuple[str, str] | None:
    """``(group, option)`` whose schema is ``schema``, or None for a class that is not one."""
    return next((key for key, value in SCHEMAS.items() if value is schema), None)


def defaults(schema: type) -> dict:
    """The schema's keys and default values, in its order."""
    return {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory() for f in
            dataclasses.fields(schema)}  # fmt: skip


register()
