"""The command line, in and out, shared by every entry point.

- :mod:`vitpos.cli.options`: ``key=value`` options of the ``python -m vitpos.*`` tools and ``bench``;
- :mod:`vitpos.cli.hydra_errors`: ``train.py``'s Hydra composition errors as one line;
- :mod:`vitpos.cli.console`: user errors as one line (exit code 2) and the quiet training console.
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
