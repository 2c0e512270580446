"""What a command prints: a user error as one line, and a quiet training console.

:func:`run_main` prints a user error (:class:`vitpos.errors.InputError`) as one
line ``error: ...`` with exit code 2 instead of a traceback. The training
console (:func:`quiet_console`, :func:`progress_bar`, :func:`summary_line`) is
one line per message, one model summary line and a progress bar named after the
run.

Lightning logs through its own ``lightning.*`` loggers, each with one handler
when the root logger has none; ``configs/train.yaml`` therefore turns Hydra's
job and hydra logging off (``none``) so nothing prints twice. The warnings
silenced here are known and harmless for this project; each filter names the
message it drops.
"""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Callable

from vitpos.errors import InputError


def run_main(main: Callable[[list[str] | None], int | None], argv: list[str] | None = None) -> None:
    """``sys.exit(main(argv))``, but a user error prints ``error: <message>`` on
    one line and exits with code 2 (no traceback)."""
    try:
        code = main(argv)
    except Exception as err:  # noqa: BLE001 (filtered just below; everything else re-raised)
        if not isinstance(err, InputError):
            raise
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    sys.exit(code or 0)


#: (message regex, why it is harmless here)
KNOWN_WARNINGS = (
    (r".*isinstance\(treespec, LeafSpec\)` is deprecated.*", "inside lightning's pytree helper, not our code"),
    (r".*smaller than the logging interval.*", "short runs log once per epoch anyway"),
    (r".*Checkpoint directory .* exists and is not empty.*", "resume writes into its own run folder on purpose"),
    (r".*does not have many workers.*", "data sets are decoded into memory; workers would only copy them"),
    (r".*module\(s\) in eval mode at the start of training.*", "the EMA copy (task.ema_decay) is never trained"),
)


class _DropAdvert(logging.Filter):
    """Drops Lightning's logger advertisement (the litlogger / tensorboardX tip)."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return "litlogger" not in text and "tensorboardX" not in text


class _Stderr(logging.StreamHandler):
    """A handler that writes to whatever ``sys.stderr`` is when a message is logged, not to the
    stream it found when it was made: a caller that swaps ``sys.stderr`` (pytest's ``capsys``, a
    ``redirect_stderr``) then sees the ``vitpos`` lines, and a stream closed since is never used."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:  # logging.StreamHandler.__init__ assigns it
        pass


def quiet_console() -> None:
    """Silence the known third-party warnings and set up the ``vitpos`` logger (once)."""
    for message, _why in KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", message=message)
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropAdvert) for f in logger.filters):
            logger.addFilter(_DropAdvert())
    log = logging.getLogger("vitpos")
    if not log.handlers:
        handler = _Stderr()
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def quiet_side_by_side() -> None:
    """Jobs that a joblib sweep runs side by side print at the same time, so only their labelled
    lines stay: the sweep's start and end line per job (name, minutes, test/acc) and each epoch's
    line (``<run>/seed<k>: epoch ...``). Lightning's and vitpos's setup lines go (warnings and errors
    stay); the caller leaves out the final metrics block (metrics.json and the end line have it)."""
    for name in ("lightning.pytorch", "lightning.fabric", "vitpos"):
        logging.getLogger(name).setLevel(logging.WARNING)


def progress_bar(run_name: str):
    """Lightning's default progress bar (Rich when installed, else tqdm) showing
    ``run: <run_name>`` instead of the logger's ``v_num``."""
    from lightning.pytorch.callbacks import TQDMProgressBar
    from lightning.pytorch.callbacks.progress.rich_progress import _RICH_AVAILABLE, RichProgressBar

    base = RichProgressBar if _RICH_AVAILABLE else TQDMProgressBar

    class NamedProgressBar(base):
        def get_metrics(self, trainer, pl_module):
            items = super().get_metrics(trainer, pl_module)
            items.pop("v_num", None)
            return {"run": run_name, **items}

    return NamedProgressBar()


def summary_line(module) -> str:
    """One line in place of Lightning's model summary table."""
    model = module.model
    params = sum(p.numel() for p in model.parameters())
    pos = sum(p.numel() for p in model.pos.parameters())
    return f"model: {type(model).__name__}, {params / 1e3:.1f}k parameters ({pos / 1e3:.1f}k in the encoding)"
