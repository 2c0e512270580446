"""The one check of a composed config, before anything is written.

``validate(cfg)`` runs once per run, first thing in :func:`vitpos.train.train`,
before any run folder, logger or dataset exists. It raises :class:`UserError`,
which the command line prints as one line ``error: <option>: <what> (<fix>)``
with exit code 2 and no traceback (see ``vitpos.cli.run_main``).

Each kind of rule has its module in :mod:`vitpos.checks`: the plain options (``checks/options.py``:
the task and the options it needs, first, as the other checks depend on them; the typed options,
run names, threads and trainer keys), data, sizes and memory (``checks/data.py``) and the model
(``checks/model.py``: a timm model and its checkpoint, the encoding, then the run's own network
built and run once, so each constructor stays the one place its rules are written). The plain
checks come first and need no torch.

One default depends on the model, so it is filled in here, once its patch size is known (a timm
model's from timm): ``eval.resolutions=auto`` becomes the sizes it stands for
(:func:`vitpos.checks.data.eval_resolutions`), written into ``cfg`` itself, so that the run tests
them and its saved config (``hparams.yaml``, every checkpoint) names them.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import OmegaConfBaseException

from vitpos.checks.data import (
    AUTO,
    check_data_choices,
    check_data_counts,
    check_data_paths,
    check_memory,
    check_sizes,
    eval_resolutions,
)
from vitpos.checks.model import check_encoding, check_timm_checkpoint, with_timm_geometry
from vitpos.checks.options import (
    check_needed,
    check_options,
    check_run_names,
    check_task,
    check_threads,
    check_trainer_keys,
)
from vitpos.errors import UserError

__all__ = ["UserError", "resolved", "validate"]


def validate(cfg) -> None:
    """Raise :class:`UserError` for the first problem in ``cfg`` (an OmegaConf config); then fill
    ``eval.resolutions=auto`` in ``cfg`` with the sizes it stands for (:func:`fill_resolutions`)."""
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
        plain["eval"] = {**(plain.get("eval") or {}), "resolutions": eval_resolutions(plain)}  # auto: a list
        check_data_counts(plain)
        check_timm_checkpoint(plain)
    check_memory(plain, image)
    check_trainer_keys(plain["trainer"])  # imports Lightning: after the checks that need nothing heavy
    check_encoding(plain, image)
    if image:
        fill_resolutions(cfg, plain["eval"]["resolutions"])


def fill_resolutions(cfg, sizes: list) -> None:
    """``cfg.eval.resolutions = sizes`` where it is ``auto``: what the run then tests, and what its
    saved config says it tested (a list given stays as written)."""
    if isinstance(cfg, DictConfig) and OmegaConf.select(cfg, "eval.resolutions") == AUTO:
        with read_write(cfg), open_dict(cfg):
            cfg.eval.resolutions = sizes


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
