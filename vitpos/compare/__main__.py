"""``python -m vitpos.compare runs=DIR ...``: the options are ``summary.CompareOptions`` (``--help``);
what is read and written is in the package docstring."""

from __future__ import annotations

import sys

from vitpos.cli import run_main
from vitpos.compare import summary


def main(argv: list[str] | None = None) -> int:
    """:func:`vitpos.compare.summary.main`, with ``out=`` naming a file (or a path through one)
    refused in one line: the report is a folder, and the file is left untouched (the report
    folder is made before anything is written, so nothing is)."""
    try:
        return summary.main(argv)
    except (FileExistsError, NotADirectoryError) as err:  # worded as summary.main words its own refusals
        what = "is a file, not a folder" if isinstance(err, FileExistsError) else "lies inside a file, not a folder"
        print(f"error: out={err.filename}: {what} (pass out=<a folder> for report.md, the CSVs and the plots)",
              file=sys.stderr)  # fmt: skip
        return 2


if __name__ == "__main__":
    run_main(main)  # a user error: one line, exit 2
