"""The typed schema of vitpos's config groups: dataclasses, registered in Hydra's ConfigStore on import.

Each dataclass holds a group option's keys and defaults (here, so an installed vitpos needs no YAML to build a
data module); ``configs/<group>/<name>.yaml`` starts from ``/schema/<group>/<name>@_here_`` and sets what differs.
Hydra's struct mode refuses a key the schema lacks, in a YAML file or on the command line.

Fields are typed ``Any``: a field's rule is its metadata (:mod:`vitpos.config.rules`), gathered in :data:`OPTIONS`,
so a bad value is worded ``error: <option>: ...`` where OmegaConf would only say it cannot convert it; rules that
read more than one value (sizes) are :mod:`vitpos.checks`'.
"""

from __future__ import annotations

import dataclasses

from hydra.core.config_store import ConfigStore

from vitpos import CONFIG_DIR
from vitpos.config.data import Cifar10Data, SeqCopyData, SeqProbeData, SeqReverseData, ShapesData
from vitpos.config.encodings import builtin_options, files_missing
from vitpos.config.eval import ImageEval, SequenceEval
from vitpos.config.model import SeqSmall, TimmModel, VitCpu, VitCpuP2, VitMicro, VitSmall, VitTiny
from vitpos.config.optim import AdamW
from vitpos.config.rules import Spec, rules
from vitpos.config.task import ClassificationTask, SequenceTask
from vitpos.config.train import Launcher, TopLevel, WrittenModel
from vitpos.config.trainer import DdpTrainer, DefaultTrainer, GpuTrainer, LightningKeys

#: (group, option) -> its schema: ``configs/<group>/<option>.yaml`` starts from it
SCHEMAS: dict[tuple[str, str], type] = {
    ("data", "cifar10"): Cifar10Data,
    ("data", "shapes"): ShapesData,
    ("data", "seq_copy"): SeqCopyData,
    ("data", "seq_reverse"): SeqReverseData,
    ("data", "seq_probe"): SeqProbeData,
    ("model", "vit_micro"): VitMicro,
    ("model", "vit_cpu"): VitCpu,
    ("model", "vit_cpu_p2"): VitCpuP2,
    ("model", "vit_tiny"): VitTiny,
    ("model", "vit_small"): VitSmall,
    ("model", "seq_small"): SeqSmall,
    ("model", "timm"): TimmModel,
    ("optim", "adamw"): AdamW,
    ("trainer", "default"): DefaultTrainer,
    ("trainer", "gpu"): GpuTrainer,
    ("trainer", "ddp"): DdpTrainer,
    ("eval", "image"): ImageEval,  # no group: a task's recipe places it at ``eval``
    ("eval", "sequence"): SequenceEval,
    ("task", "classification"): ClassificationTask,
    ("task", "sequence"): SequenceTask,
}

#: every option with a rule, ``dotted name -> rule`` (the objects the fields' metadata hold), in check order: the
#: config check, ``python train.py --help``, the config fuzzer and the run identity read it
OPTIONS: dict[str, Spec] = rules(
    [("", TopLevel), *((group, schema) for (group, _), schema in SCHEMAS.items()), ("trainer", LightningKeys),
     ("model", WrittenModel)]
)  # fmt: skip
#: a sweep's ``hydra.launcher.<key>`` options with a rule (:class:`vitpos.config.train.Launcher`)
LAUNCHER: dict[str, Spec] = rules([("", Launcher)])


def register() -> None:
    """Store every schema as ``schema/<group>/<option>``, each built-in encoding's options as
    ``schema/encoding/<name>`` and, without a YAML file, as ``encoding/<name>``. Idempotent."""
    store = ConfigStore.instance()
    for (group, option), schema in SCHEMAS.items():
        store.store(group=f"schema/{group}", name=option, node=schema)
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
