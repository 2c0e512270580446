"""``python -m vitpos.benchmark encoding=NAME ...``: options in ``BenchmarkOptions`` (``--help``)."""

from vitpos.benchmark import main
from vitpos.cli.console import run_main

if __name__ == "__main__":
    run_main(main)  # a user error: one line, exit 2
