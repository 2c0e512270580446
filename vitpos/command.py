"""The training command: ``python train.py encoding=rope_2d`` (``vitpos-train``, ``python -m vitpos``; ``-m`` sweeps;
``--help`` lists the options). The config is checked before anything is written (a sweep's jobs all before the first,
by ``hydra/sweeper=vitpos``); bad input, a composition Hydra refuses included, is one line, exit 2.
"""

import sys
import traceback
from collections.abc import Callable

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from omegaconf import DictConfig

from vitpos import CONFIG_DIR
from vitpos.checks.options import check_launcher
from vitpos.cli.hydra_errors import override_error
from vitpos.cli.train_help import encoding_lines, group_lines, option_lines  # --help's lists; no torch
from vitpos.config import HYDRA_1_3, HYDRA_BASE  # importing it registers the schemas the configs start from
from vitpos.errors import InputError
from vitpos.run import signals, sweep
from vitpos.validate import validate

SWEEP_WORDS = ("-m", "--multirun")
CONFIG_DIR_WORDS = ("--config-dir", "-cd")  # a folder of the user's own group options, searched first


def help_text(lines: Callable[[], list[str]]) -> Callable[[], str]:
    """A resolver of ``--help`` text; empty for any other command (Hydra resolves it always; the lists import torch)."""
    return lambda: "\n".join(lines()) if {"--help", "-h"} & set(sys.argv[1:]) else ""


for _name, _lines in (("encodings", encoding_lines), ("options", option_lines), ("groups", group_lines)):
    sweep.add_resolver(f"vitpos_{_name}", help_text(_lines))
sweep.register_resolver()  # ${vitpos_image_encodings:}: the list configs/sweep/image_encodings.yaml sweeps


#: Hydra 1.4 asks which classes a config may name (``hydra.callbacks``: vitpos.run.sweep.SweepReport)
TRUSTED = {} if HYDRA_1_3 else {"execution_whitelist": "vitpos.*"}


@hydra.main(config_path=str(CONFIG_DIR), config_name="train", **HYDRA_BASE, **TRUSTED)  # absolute: also imported
def run(cfg: DictConfig) -> float:
    """One job of Hydra's: check the composed ``cfg``, train it; in a sweep, record how it ended."""
    sweep.composed()  # Hydra reports this job's own errors again (the callback did already, where configured)
    hydra_cfg = HydraConfig.get()
    sweep.name_model(cfg, hydra_cfg.runtime.choices)  # the model's config name for the run folder
    in_sweep = sweep.in_sweep(hydra_cfg)
    try:
        check_launcher(hydra_cfg.launcher)  # a single run too: +hydra.launcher.nosuch=1 is a typo, not a no-op
        validate(cfg)  # before torch loads and anything is written (a sweep's jobs: checked by the sweeper too)
        from vitpos.run.identity import run_dir
        from vitpos.train import train

        metrics = train(cfg, checked=True)
    except SystemExit as err:  # Lightning's SIGTERMException carries no code: exit 128 + SIGTERM, not 0
        sys.exit(143 if err.code is None else err.code)
    except Exception as err:  # a single run stops; a sweep records it and goes on with the next job
        if not in_sweep:
            if isinstance(err, InputError):
                sweep.refuse(err)
            raise
        if not isinstance(err, InputError) and signals.stopping() is None:  # after a stop: the stop's doing
            traceback.print_exc()
        print(sweep.record_failure(hydra_cfg.runtime.output_dir, err), file=sys.stderr)
        return float("nan")
    else:
        if in_sweep:
            sweep.record_outcome(hydra_cfg.runtime.output_dir, metrics, run_dir(cfg))
    finally:
        signals.job_running(False)
    return metrics.get("val/acc_best", metrics.get("test/acc", float("nan")))


def main(argv: list[str] | None = None) -> None:
    """``python train.py ARGV`` (default: this process's arguments); a sweep with a failed job exits 1. A single run
    gets ``hydra.output_subdir=null`` (nothing outside its run folder) before its first override (argparse refuses
    overrides on both sides of a flag like ``--cfg job``)."""
    saved, prog = sys.argv, sys.argv[0] if argv is None else __file__  # in process: not the caller's name
    argv = sys.argv[1:] if argv is None else list(argv)
    flags = {a.partition("=")[0] for a in argv if a.startswith("-")}
    raising = not flags - {*SWEEP_WORDS, *CONFIG_DIR_WORDS} and sweep.raise_composition_errors()  # not --help, --cfg
    words = list(argv)
    if not flags & set(SWEEP_WORDS) and not any(a.startswith("hydra.output_subdir=") for a in argv):
        first = next((i for i, a in enumerate(argv) if "=" in a and not a.startswith("-")), len(argv))
        words.insert(first, "hydra.output_subdir=null")
    sys.argv = [prog, *words]  # Hydra's main reads its words here
    try:
        with signals.app():
            run()
    except (HydraException, ValueError) as err:  # ValueError: a config group set to null (optim=null)
        if not (raising and sweep.composing()):
            raise
        sweep.refuse(override_error(err, CONFIG_DIR, [a for a in argv if not a.startswith("-")]))
    finally:
        sys.argv = saved
        sweep.composed()
    if sweep.sweep_failed():  # every job ran; the summary above lists the failed ones
        sys.exit(1)
