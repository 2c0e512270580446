"""The one check of a composed config, run first in :func:`vitpos.train.train`, before any run folder exists:
a :class:`UserError` is printed as ``error: <option>: <what> (<fix>)``, exit code 2 (``vitpos.cli.run_main``).
``eval.resolutions=auto`` depends on the patch size (a timm model's comes from timm), so it is filled into
``cfg`` here: the run's saved config (``hparams.yaml``, checkpoints) names the sizes it tests.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import OmegaConfBaseException

from vitpos.checks import data, model, options
from vitpos.config import OPTIONS
from vitpos.config.rules import IMAGE, SEQUENCE, check_options
from vitpos.errors import UserError
from vitpos.integrations import is_timm


def validate(cfg, plugins: bool = True) -> None:
    """Raise :class:`UserError` for the first problem in ``cfg``, then fill in ``eval.resolutions=auto``. The
    plain options first, then the data module and the network built as training builds them, then what no
    constructor can know. ``plugins=False``: import no ``encoding.module`` (a config read off disk, e.g. by
    ``vitpos.compare``), so a plug-in encoding's options and network go unchecked."""
    plain = resolved(cfg)
    timm = isinstance(plain.get("model"), dict) and is_timm(plain["model"])  # asked once, handed on
    image = options.check_task(plain.get("task"))
    options.check_needed(plain, image, timm)
    check_options(plain, IMAGE if image else SEQUENCE, OPTIONS)  # the schema's rules of single values
    options.check_run_names(plain["run"])
    options.check_run_root(plain["run"].get("root"))
    options.check_trainer_keys(plain["trainer"])  # imports Lightning: after the checks that need nothing heavy
    options.check_trainer_values(plain["trainer"])
    options.check_threads(plain.get("threads", "auto"))  # imports only vitpos.runtime
    data_module, counts = data.check_data(plain, image)  # nothing loaded: the network's classes and tokens
    plain["model"] = model.check_model(plain, image, timm, data_module, plugins)  # model=timm: geometry from timm
    resolutions = data.check_evaluation(plain, image, counts)
    if image and isinstance(cfg, DictConfig) and OmegaConf.select(cfg, "eval.resolutions") == data.AUTO:
        with read_write(cfg), open_dict(cfg):
            cfg.eval.resolutions = resolutions


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
