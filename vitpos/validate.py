"""The one check of a composed config, run first in :func:`vitpos.train.train`, before any run folder exists.

:func:`validate` raises :class:`UserError`, printed as ``error: <option>: <what> (<fix>)`` with exit code 2
and no traceback (``vitpos.cli.run_main``); the rules live in :mod:`vitpos.checks`. ``eval.resolutions=auto``
depends on the patch size (a timm model's comes from timm), so it is filled into ``cfg`` here: the run tests
those sizes and its saved config (``hparams.yaml``, checkpoints) names them.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import OmegaConfBaseException

from vitpos.checks.data import (
    AUTO,
    check_data_counts,
    check_data_module,
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
    """Raise :class:`UserError` for the first problem in ``cfg``, then fill in ``eval.resolutions=auto``."""
    plain = resolved(cfg)
    image = check_task(plain.get("task"))
    check_needed(plain, image)
    check_options(plain, image)
    check_threads(plain.get("threads", "auto"))
    check_run_names(plain["run"])
    check_data_paths(plain["data"], image)
    plain["model"] = with_timm_geometry(plain, image)  # model=timm: its patch size, width, ... from timm
    counts = None
    if image:
        check_sizes(plain)
        plain["eval"] = {**(plain.get("eval") or {}), "resolutions": eval_resolutions(plain)}  # auto: a list
        counts = check_data_counts(plain)
        check_timm_checkpoint(plain)
    check_memory(plain, image, counts)
    check_trainer_keys(plain["trainer"])  # imports Lightning: after the checks that need nothing heavy
    check_data_module(plain, image)
    check_encoding(plain, image)
    if image:
        fill_resolutions(cfg, plain["eval"]["resolutions"])


def fill_resolutions(cfg, sizes: list) -> None:
    """Set ``cfg.eval.resolutions = sizes`` where it is ``auto`` (a list given stays as written)."""
    if isinstance(cfg, DictConfig) and OmegaConf.select(cfg, "eval.resolutions") == AUTO:
        with read_write(cfg), open_dict(cfg):
            cfg.eval.resolutions = sizes


def resolved(cfg) -> dict:
    """``cfg`` as a plain dict, every ``${...}`` resolved; a :class:`UserError` names the option whose
    interpolation fails (no such option, e.g. ``${data.nosuch}``; an unknown resolver; an unset variable)."""
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
