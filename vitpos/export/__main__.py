"""``python -m vitpos.export ckpt=PATH ...``: options in ``cli.ExportOptions`` (``--help``)."""

from vitpos.cli.console import run_main
from vitpos.export.cli import main

if __name__ == "__main__":
    run_main(main)  # a user error: one line, exit 2; a model no range exports: exit 1
