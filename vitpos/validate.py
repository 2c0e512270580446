"""The one check of a composed config, before anything is written.

``validate(cfg)`` runs once per run, first thing in :func:`vitpos.train.train`,
before any run folder, logger or dataset exists. It raises :class:`UserError`,
which the command line prints as one line ``error: <option>: <what> (<fix>)``
with exit code 2 and no traceback (see ``vitpos.cli.run_main``).

Each kind of rule has its module in :mod:`vitpos.checks`: the typed number options
(``checks/options.py``), run names and threads (``checks/names.py``), data options and sizes
(``checks/data.py``), memory (``checks/memory.py``), trainer keys (``checks/trainer.py``), a timm
model and its checkpoint (``checks/timm_model.py``) and the encoding (``checks/encoding.py``). The
plain checks come first and need no torch; the trainer keys import Lightning, a timm model torch and
timm, and the encoding checks build the encoding on the model's real geometry, so each encoding's
own class stays the one place its rules are written.
"""

from __future__ import annotations

from omegaconf import OmegaConf

from vitpos.checks.data import check_data_choices, check_data_counts, check_data_paths, check_sizes, image_counts
from vitpos.checks.encoding import check_encoding, encoding_names, exercise
from vitpos.checks.memory import MEMORY_FRACTION, check_memory
from vitpos.checks.names import RUN_FOLDER_KEYS, check_folder_name, check_run_names, check_threads
from vitpos.checks.options import OPTIONS, check_options
from vitpos.checks.timm_model import check_timm_checkpoint, with_timm_geometry
from vitpos.checks.trainer import check_trainer_keys, trainer_options
from vitpos.errors import UserError

__all__ = [
    "MEMORY_FRACTION",
    "OPTIONS",
    "RUN_FOLDER_KEYS",
    "UserError",
    "check_data_choices",
    "check_data_counts",
    "check_data_paths",
    "check_encoding",
    "check_folder_name",
    "check_memory",
    "check_options",
    "check_run_names",
    "check_sizes",
    "check_threads",
    "check_timm_checkpoint",
    "check_trainer_keys",
    "encoding_names",
    "exercise",
    "image_counts",
    "trainer_options",
    "validate",
    "with_timm_geometry",
]


def validate(cfg) -> None:
    """Raise :class:`UserError` for the first problem in ``cfg`` (an OmegaConf config)."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    image = plain["task"]["name"] != "sequence"
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
