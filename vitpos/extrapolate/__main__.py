"""``python -m vitpos.extrapolate ckpt=PATH ...``: options in ``checkpoints.ExtrapolateOptions`` (``--help``)."""

from vitpos.cli.console import run_main
from vitpos.extrapolate.checkpoints import main

if __name__ == "__main__":
    run_main(main)  # a user error: one line, exit 2; failed checkpoints: exit 1
