"""The errors that mean "the input was wrong", not the program.

Every command line (``train.py`` and each ``python -m vitpos.*`` tool) prints
an :class:`InputError` as one line ``error: <message>`` and exits with code 2,
without a traceback (``vitpos.cli.run_main``). Each kind of bad input has its
subclass here, so that one ``except InputError`` catches them all and no module
has to import the modules that raise them.
"""

from __future__ import annotations


class InputError(Exception):
    """Base class: bad options, files or data, printed as one line (exit code 2)."""


class UserError(InputError, ValueError):
    """A bad option or input file: printed as ``error: <option>: <what> (<fix>)``."""

    def __init__(self, option: str, what: str, fix: str | None = None):
        self.option, self.what, self.fix = option, what, fix
        super().__init__(f"{option}: {what}" + (f" ({fix})" if fix else ""))


class CheckpointError(InputError, ValueError):
    """A checkpoint that cannot be used: missing, corrupt, unsafe or not a vitpos run."""


class DatasetNotFoundError(InputError, RuntimeError):
    """The data set is not where the config says, and cannot be downloaded."""


class DataError(DatasetNotFoundError):
    """The data set is there but unusable (truncated images, wrong sizes, too few images)."""


class DivergenceError(InputError, RuntimeError):
    """Training stopped because the loss diverged (the options, usually ``optim.lr``, are at fault)."""
