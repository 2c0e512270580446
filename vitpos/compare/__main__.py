"""``python -m vitpos.compare runs=DIR ...``: the options are ``summary.CompareOptions`` (``--help``);
what is read and written is in the package docstring."""

from __future__ import annotations

from vitpos.cli.console import run_main
from vitpos.compare.summary import main

if __name__ == "__main__":
    run_main(main)  # a user error: one line, exit 2
