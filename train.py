"""Train one configuration: ``python train.py encoding=rope_2d`` (Hydra; ``-m`` sweeps).

See configs/train.yaml for every option, ``python train.py --help`` for a
summary and README.md for the recipes. The config is checked before anything
is written (vitpos/validate.py); a bad option or input prints one line
``error: <option>: <what> (<fix>)`` and exits with code 2.
"""

import shutil
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf, open_dict

CONFIGS = Path(__file__).resolve().parent / "configs"


def encoding_help() -> str:
    """The encodings grouped by image / sequence, one line each (for --help).

    Hydra resolves its own config, help text included, on every call: build the
    list (it imports torch) only when help was asked for."""
    if not {"--help", "-h"} & set(sys.argv[1:]):
        return ""
    import re
    import textwrap

    from vitpos.encodings import get_encoding_class, list_encodings

    lines = []
    for title, dims in (("images (2D grids)", 2), ("sequences (1D)", 1)):
        lines.append(f"  {title}:")
        for name in list_encodings(dims):
            doc = " ".join((get_encoding_class(name).__doc__ or "").split())
            first = re.split(r"(?<!\bal)\.\s+", doc)[0].rstrip(".")  # first sentence ("et al." kept)
            lines.append(f"    {name:<16} {textwrap.shorten(first, 84, placeholder=' ...')}")
    return "\n".join(lines)


OmegaConf.register_new_resolver("vitpos_encodings", encoding_help, replace=True)


def report(err: BaseException) -> None:
    """One line on stderr and exit code 2: the user's input was wrong, not the program."""
    print(f"error: {err}", file=sys.stderr)
    sys.exit(2)


def precheck(argv: list[str]) -> None:
    """Compose the command's config as Hydra will, so a bad override (unknown key,
    unknown group option) is one line here instead of Hydra's multi-line report."""
    if any(a.startswith("-") for a in argv):  # --help, -m sweeps, --cfg: Hydra's own business
        return
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    from vitpos.cli import override_error

    overrides = [a for a in argv if not a.lstrip("+~").startswith(("hydra.", "hydra/"))]
    try:
        with initialize_config_dir(str(CONFIGS), version_base="1.3"):
            compose("train", overrides=overrides)
    except HydraException as err:
        report(override_error(err, CONFIGS, overrides))


def remove_empty_parents(folder: Path, root: Path) -> None:
    """Remove the folders between ``folder`` and ``root`` (inclusive) that are now empty."""
    for parent in folder.parents:
        if not parent.is_relative_to(root) or not parent.is_dir() or any(parent.iterdir()):
            break
        parent.rmdir()


def user_errors() -> tuple[type[BaseException], ...]:
    """Errors that are the input's fault: printed as one line, exit code 2."""
    from vitpos.cli import user_error_types

    return user_error_types()


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> float:
    from hydra.core.hydra_config import HydraConfig

    from vitpos.validate import UserError, validate

    try:
        with open_dict(cfg):  # the model's config name for the run folder (vitpos/runs.py)
            cfg.run.model = cfg.run.get("model") or HydraConfig.get().runtime.choices.get("model")
        validate(cfg)  # before any folder, logger or heavy import
        from vitpos.runtime import resolve_runtime

        resolve_runtime(cfg)  # threads per job when a sweep runs jobs side by side
    except (UserError, ValueError) as err:
        report(err)
    from vitpos.runs import run_dir
    from vitpos.train import train

    out = run_dir(cfg)
    existed = out.exists()
    try:
        metrics = train(cfg)
    except user_errors() as err:
        diverged = (out / "metrics.json").exists()  # the run's diverged marker, kept for compare
        if not existed and out.exists() and not any(out.rglob("*.ckpt")) and not diverged:  # failed before a step
            shutil.rmtree(out)
            remove_empty_parents(out, Path(cfg.run.root))
        report(err)
    except SystemExit as err:  # Lightning's SIGTERMException carries no code: exit 128 + SIGTERM, not 0
        sys.exit(143 if err.code is None else err.code)
    return metrics.get("val/acc_best", metrics.get("test/acc", float("nan")))


if __name__ == "__main__":
    precheck(sys.argv[1:])
    single = not {"-m", "--multirun"} & set(sys.argv[1:])
    if single and not any(a.startswith("hydra.output_subdir=") for a in sys.argv[1:]):  # nothing outside run folder
        sys.argv.append("hydra.output_subdir=null")
    main()
