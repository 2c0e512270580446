"""The command line, in and out: what every entry point shares, one module per job.

- :mod:`vitpos.cli.options`: the ``key=value`` options of every ``python -m vitpos.*``
  tool and ``bench`` (:func:`option`, :func:`parse_options`, ``--help``,
  :func:`expand_paths`);
- :mod:`vitpos.cli.hydra_errors`: Hydra's composition errors of ``train.py`` as one
  line (:func:`override_error`);
- :mod:`vitpos.cli.console`: what a command prints (:func:`run_main`: a user error
  as one line, exit code 2; the quiet training console, its one line on a machine
  without a GPU and its progress bar).
"""

from vitpos.cli.console import (
    KNOWN_WARNINGS,
    device_line,
    progress_bar,
    quiet_console,
    quiet_side_by_side,
    run_main,
    summary_line,
)
from vitpos.cli.hydra_errors import override_error
from vitpos.cli.options import HELP_WORDS, expand_paths, help_text, option, parse_options

__all__ = [
    "HELP_WORDS",
    "KNOWN_WARNINGS",
    "device_line",
    "expand_paths",
    "help_text",
    "option",
    "override_error",
    "parse_options",
    "progress_bar",
    "quiet_console",
    "quiet_side_by_side",
    "run_main",
    "summary_line",
]
