"""The generated parts of ``python train.py --help``: the encodings by kind, the checked options by
config group, and the config groups; every line within :data:`WIDTH` columns, so the page reads in a
terminal.

The words come from their owners: an encoding's first docstring sentence (the registry), an option's
rule and help (the schema's field metadata: :data:`vitpos.config.OPTIONS`, :data:`vitpos.config.LAUNCHER`), the
group options (the package's ``configs/``). The fixed text around them is Hydra's help template,
``configs/hydra/help/vitpos.yaml``. No torch is imported until the encoding list is asked for.
"""

from __future__ import annotations

import re
import textwrap

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
NAME_COLUMN = 28  # options: "    <key> " then the rule, continuation lines under the rule


def wrapped(left: str, text: str, indent: int) -> list[str]:
    """``left`` then ``text``, wrapped within :data:`WIDTH` with continuation lines indented ``indent``."""
    return textwrap.wrap(left + text, WIDTH, subsequent_indent=" " * indent, break_long_words=False,
                         break_on_hyphens=False) or [left.rstrip()]  # fmt: skip


def encoding_lines() -> list[str]:
    """The image encodings, one line each (the name and its first docstring sentence); then the
    sequence encodings, the ones also listed for images by name only."""
    from vitpos.encodings import get_encoding_class, list_encodings

    def line(name: str) -> str:
        # an option's name keeps one mark (`parabolas` concave parabolas): without it, it reads as a doubled word
        doc = " ".join((get_encoding_class(name).__doc__ or "").replace("``", "`").split())
        first = re.split(r"(?<!\bal)\.\s+", doc)[0].rstrip(".")  # first sentence ("et al." kept)
        left = f"    {name:<16} "
        return left + textwrap.shorten(first, WIDTH - len(left), placeholder=" ...")

    images = list_encodings(2)
    lines = ["  images (2D grids):", *map(line, images), "  sequences (1D):"]
    lines += [line(name) for name in list_encodings(1) if name not in images]
    shared = [name for name in list_encodings(1) if name in images]
    return lines + wrapped("    also, as above: ", ", ".join(shared), 8)


def option_lines() -> list[str]:
    """The checked options by config group (an option of one task only tagged ``[img]`` or
    ``[seq]``), then the sweep launcher's; :data:`SAME_FOLDER` marks the options that do not
    define the run, explained once at the top."""
    groups: dict[str, list[str]] = {}
    for option, spec in sorted(OPTIONS.items(), key=lambda item: list(TAG).index(item[1].task)):  # every task first
        key = option + ("" if spec.defines else SAME_FOLDER)
        left = f"    {key:<{NAME_COLUMN}} "
        text = f"{TAG[spec.task]}{describe(spec)}: {spec.help}"
        groups.setdefault(option.split(".")[0], []).extend(wrapped(left, text, len(left)))
    order = sorted(groups, key=lambda g: (GROUP_ORDER.index(g) if g in GROUP_ORDER else len(GROUP_ORDER), g))
    lines = SAME_FOLDER_NOTE.splitlines()
    for group in order:
        lines += [f"  {group}:", *groups[group]]
    lines.append("  hydra.launcher (sweeps, -m, where the launcher has the option):")
    for key, spec in LAUNCHER.items():
        left = f"    {key:<{NAME_COLUMN}} "
        lines += wrapped(left, f"{describe(spec)}: {spec.help}", len(left))
    return lines


def group_lines() -> list[str]:
    """Every config group of the package's ``configs/`` and its options (``group=option``)."""
    lines = []
    for folder in sorted(p for p in CONFIG_DIR.iterdir() if p.is_dir() and p.name != "hydra"):
        names = sorted(p.stem for p in folder.glob("*.yaml"))
        if folder.name == "encoding":
            names = ["any name listed under Encodings above", *[n for n in names if n == "plugin"]]
        left = f"  {folder.name}: "
        lines += wrapped(left, ", ".join(names), len(left))
    return lines
