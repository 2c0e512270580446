"""``task.name``: the task a config trains, checked first because every other check depends on it
(an image task checks sizes and patches, a sequence task lengths).

:func:`vitpos.tasks.build.build` maps the name to its modules and refuses an unknown one too, but
only after the run folder exists; this check refuses it before anything is written, without torch.
"""

from __future__ import annotations

from vitpos.errors import UserError
from vitpos.integrations import is_timm

#: the tasks vitpos.tasks.build.build knows (configs/task/<name>.yaml sets task.name)
TASKS = ("classification", "sequence")


def check_task(task) -> bool:
    """True for an image task, False for a sequence task; a :class:`UserError` naming
    ``task.name`` for anything else (``task`` is the config's ``task`` section)."""
    name = task.get("name") if isinstance(task, dict) else None
    if name not in TASKS:
        raise UserError("task.name", f"unknown task {name!r}", f"valid: {', '.join(TASKS)} (task=...)")
    return name != "sequence"


#: the options the checks and the run read without a default, by task (None: every task); a
#: ``~key`` override deletes one, and a model or data config of the other task lacks some
NEEDS = {
    None: ("data", "model", "encoding", "optim", "trainer", "run", "optim.lr", "trainer.max_epochs"),
    "model": ("model.dim", "model.depth", "model.num_heads"),  # not for model=timm: timm's model has them
    "image": ("data.name", "data.img_size"),
    "image model": ("model.patch_size",),  # not for model=timm either
    "sequence": ("data.task", "data.train_len", "data.vocab_size"),
}
#: where a missing option of a section comes from: the group configs of each task
SOURCES = {
    ("model", True): "an image model config sets it, e.g. model=vit_micro (configs/model/)",
    ("model", False): "a sequence model config sets it: model=seq_small",
    ("data", True): "an image data config sets it: data=cifar10 or data=shapes",
    ("data", False): "a sequence data config sets it, e.g. data=seq_copy (configs/data/)",
}


def check_needed(c: dict, image: bool) -> None:
    """Every option of :data:`NEEDS` this task reads is in the config ``c`` (a plain dict; a null
    value is the typed checks' business, which say what it must be); ``model=timm`` needs no
    model geometry: it comes from timm (``checks/timm_model.py``)."""
    timm = isinstance(c.get("model"), dict) and is_timm(c["model"])
    groups = [None, "image" if image else "sequence"] + ([] if timm else ["model"] + ["image model"] * image)
    for option in (o for g in groups for o in NEEDS[g]):
        node = c
        for key in option.split("."):
            if not isinstance(node, dict) or key not in node:
                section = option.split(".")[0]
                fix = SOURCES.get((section, image), f"configs/ sets it; '~{option}' deletes it")
                raise UserError(option, f"missing, and the {'image' if image else 'sequence'} task needs it", fix)
            node = node[key]
