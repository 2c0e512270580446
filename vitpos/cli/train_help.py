"""The generated lists of ``python train.py --help``, each line within :data:`WIDTH` columns: the encodings (each
class's first docstring sentence), the checked options by config group (each rule and help of the schema:
:data:`vitpos.config.OPTIONS`, :data:`vitpos.config.LAUNCHER`) and the config groups of ``configs/``. The text around
them is ``configs/hydra/help/vitpos.yaml``; no torch is imported until the encoding list is asked for.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from vitpos import CONFIG_DIR
from vitpos.config import LAUNCHER, OPTIONS
from vitpos.config.rules import IMAGE, SEQUENCE, describe

WIDTH = 100
#: the mark of an option that does not define the run (explained once, above the list)
SAME_FOLDER = "*"
SAME_FOLDER_NOTE = (
    f"  {SAME_FOLDER} after a key: the option changes how a run is shown or how fast it goes, not what it"
    "\n    learns, so another value keeps the same run folder (the same command resumes or reuses it)."
    "\n  [img] / [seq]: an option of image runs / of sequence runs only."
)
#: config groups in the order a newcomer meets them; any other comes after, by name
GROUP_ORDER = ("model", "data", "optim", "trainer", "task", "eval", "seed")
TAG = {None: "", IMAGE: "[img] ", SEQUENCE: "[seq] "}


def wrapped(left: str, text: str, indent: int | None = None) -> list[str]:
    """``left`` then ``text`` within :data:`WIDTH`, continuation lines indented ``indent`` (default: under ``text``)."""
    pad = " " * (indent or len(left))
    return textwrap.wrap(left + text, WIDTH, subsequent_indent=pad, break_long_words=False, break_on_hyphens=False) or [
        left.rstrip()
    ]


def config_names(configs: Path, group: str) -> list[str]:
    """The options of the config group ``group``: its files (no torch: ``encoding``'s are the registry's names)."""
    return sorted(p.stem for p in (configs / group).glob("*.yaml"))


def encoding_lines() -> list[str]:
    """The image encodings, one line each (name, first docstring sentence); then the sequence encodings, the ones
    also listed for images by name only."""
    from vitpos.encodings import get_encoding_class, list_encodings

    def line(name: str) -> str:
        # an option's name keeps one mark (`parabolas` concave parabolas): without it, it reads as a doubled word
        doc = " ".join((get_encoding_class(name).__doc__ or "").replace("``", "`").split())
        first = re.split(r"(?<!\bal)\.\s+", doc)[0].rstrip(".")  # first sentence ("et al." kept)
        left = f"    {name:<16} "
        return left + textwrap.shorten(first, WIDTH - len(left), placeholder=" ...")

    images, sequences = list_encodings(2), list_encodings(1)
    lines = ["  images (2D grids):", *map(line, images), "  sequences (1D):"]
    lines += [line(name) for name in sequences if name not in images]
    return lines + wrapped("    also, as above: ", ", ".join(n for n in sequences if n in images), 8)


def option_lines() -> list[str]:
    """The checked options by config group, every task's first (one task's tagged ``[img]`` or ``[seq]``), then the
    sweep launcher's; :data:`SAME_FOLDER` marks the options that do not define the run."""
    groups: dict[str, list[str]] = {}
    for option, spec in sorted(OPTIONS.items(), key=lambda item: list(TAG).index(item[1].task)):
        key = option + ("" if spec.defines else SAME_FOLDER)
        groups.setdefault(option.split(".")[0], []).extend(_option(key, spec, TAG[spec.task]))
    lines = SAME_FOLDER_NOTE.splitlines()
    for group in sorted(groups, key=lambda g: (GROUP_ORDER.index(g) if g in GROUP_ORDER else len(GROUP_ORDER), g)):
        lines += [f"  {group}:", *groups[group]]
    lines.append("  hydra.launcher (sweeps, -m, where the launcher has the option):")
    return lines + [line for key, spec in LAUNCHER.items() for line in _option(key, spec)]


def _option(key: str, spec, tag: str = "") -> list[str]:
    """``    <key> <rule>: <help>``, the rule at column 33 and continuation lines under it."""
    return wrapped(f"    {key:<28} ", f"{tag}{describe(spec)}: {spec.help}")


def group_lines() -> list[str]:
    """Every config group of the package's ``configs/`` and its options (``group=option``)."""
    lines = []
    for folder in sorted(p for p in CONFIG_DIR.iterdir() if p.is_dir() and p.name != "hydra"):
        names = config_names(CONFIG_DIR, folder.name)
        if folder.name == "encoding":
            names = ["any name listed under Encodings above", *[n for n in names if n == "plugin"]]
        lines += wrapped(f"  {folder.name}: ", ", ".join(names))
    return lines
