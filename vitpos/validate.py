"""The one check of a composed config, before anything is written.

``validate(cfg)`` runs once per run, first thing in :func:`vitpos.train.train`,
before any run folder, logger or dataset exists. It raises :class:`UserError`,
which the command line prints as one line ``error: <option>: <what> (<fix>)``
with exit code 2 and no traceback (see ``vitpos.cli.run_main``).

Each kind of rule has its module in :mod:`vitpos.checks`: the typed number options
(``checks/options.py``), run names and threads (``checks/names.py``), data options and sizes
(``checks/data.py``), memory (``checks/memory.py``), trainer keys (``checks/trainer.py``), a timm
model and its checkpoint (``checks/timm_model.py``) and the encoding (``checks/encoding.py``). The
task and the options it needs (``checks/task.py``) come first, as the other checks depend on them;
the plain checks come next and need no torch; the trainer keys import Lightning, a timm model torch
and timm, and the encoding checks build the encoding on the model's real geometry, so each
encoding's own class stays the one place its rules are written.
"""

from __future__ import annotations

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from vitpos.checks.data import check_data_choices, check_data_counts, check_data_paths, check_sizes, image_counts
from vitpos.checks.encoding import check_encoding, encoding_names, exercise
from vitpos.checks.memory import MEMORY_FRACTION, check_memory
from vitpos.checks.names import RUN_FOLDER_KEYS, check_folder_name, check_run_names, check_threads
from vitpos.checks.options import OPTIONS, check_options
from vitpos.checks.task import TASKS, check_needed, check_task
from vitpos.checks.timm_model import check_timm_checkpoint, with_timm_geometry
from vitpos.checks.trainer import check_trainer_keys, trainer_options
from vitpos.errors import UserError

__all__ = [
    "MEMORY_FRACTION",
    "OPTIONS",
    "RUN_FOLDER_KEYS",
    "TASKS",
    "UserError",
    "check_data_choices",
    "check_data_counts",
    "check_data_paths",
    "check_encoding",
    "check_folder_name",
    "check_memory",
    "check_needed",
    "check_options",
    "check_run_names",
    "check_sizes",
    "check_task",
    "check_threads",
    "check_timm_checkpoint",
    "check_trainer_keys",
    "encoding_names",
    "exercise",
    "image_counts",
    "resolved",
    "trainer_options",
    "validate",
    "with_timm_geometry",
]


def validate(cfg) -> None:
    """Raise :class:`UserError` for the first problem in ``cfg`` (an OmegaConf config)."""
    plain = resolved(cfg)
    image = check_task(plain.get("task"))
    check_needed(plain, image)
    check_options(plain, image)
    check_data_choices(plain["data"])
    check_threads(plain.get("threads", "auto"))
    check_run_names(plain["run"])
    check_data_paths(plain["data"], image)
    plain["model"] = with_timm_geometry(plain, image)  # model=timm: its patch size, width, ... from timm
    if image:
        check_sizes(plain)
        check_data_counts(plain)
        check_timm_checkpoint(plain)
    check_memory(plain, image)
    check_trainer_keys(plain["trainer"])  # imports Lightning: after the checks that need nothing heavy
    check_encoding(plain, image)


def resolved(cfg) -> dict:
    """``cfg`` as a plain dict with every ``${...}`` resolved; an interpolation that names no option
    (``data.batch_size=${data.nosuch}``, or ``~data`` under ``run.group=${data.name}``), an unknown
    resolver or an unset variable is a :class:`UserError` naming the option that holds it."""
    try:
        return OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as err:
        option = str(getattr(err, "full_key", None) or "config")
        what = " ".join(str(err).splitlines()[0].split()) if str(err) else type(err).__name__
        raise UserError(
            option,
            f"cannot resolve its value: {what}",
            "a ${...} must name an option the config has or a variable that is set; else give the value itself",
        ) from None
