"""``trainer.*``: every key must be a keyword argument of Lightning's ``Trainer``.

Lightning is imported inside :func:`trainer_options`, so the plain checks before this one
refuse a bad option without loading torch."""

from __future__ import annotations

import difflib
import inspect

from vitpos.errors import UserError


def trainer_options() -> set[str]:
    """The keyword arguments of ``lightning.pytorch.Trainer``."""
    from lightning.pytorch import Trainer

    return set(inspect.signature(Trainer.__init__).parameters) - {"self"}


def check_trainer_keys(trainer: dict) -> None:
    """A key Lightning does not take is refused with the closest one it does."""
    valid = trainer_options()
    for key in trainer:
        if key not in valid:
            close = difflib.get_close_matches(key, sorted(valid), n=1)
            hint = f"did you mean trainer.{close[0]}?" if close else "see lightning.pytorch.Trainer for the valid keys"
            raise UserError(f"trainer.{key}", "not an option of Lightning's Trainer", hint)
