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
message it drops. On a machine without a GPU, Lightning's device lines (``GPU
available: False ...``, ``TPU available: False ...``) and torch's ``No CUDA runtime
is found`` become one line (:func:`device_line`). Epochs are counted from 1
everywhere a person reads them: the progress bar (``Epoch 1/3``), the epoch lines
and every message; only file names (``best-epoch000.ckpt``) keep Lightning's 0.
"""

from __future__ import annotations

import logging
import os
import re
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
    """Drops Lightning's logger advertisement (the litlogger / tensorboardX tip) and its note that it
    reads the training data to count the steps (``Loading `train_dataloader` to estimate ...``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return not any(part in text for part in ("litlogger", "tensorboardX", "to estimate number of stepping"))


#: what a machine without a GPU prints that :func:`device_line` says in one line: Lightning's
#: device lines and its mixed-precision line (its rank_zero loggers), torch's CUDA_HOME note
#: (cpp_extension, imported by torch.compile); each is dropped on a machine without a GPU only
LIGHTNING_DEVICE_LINES = re.compile(
    r"(GPU|TPU|HPU|IPU) available: False\b|Using (16bit|bfloat16) Automatic Mixed Precision \(AMP\)$"
)
NO_GPU_LINES = {
    "lightning.pytorch.utilities.rank_zero": LIGHTNING_DEVICE_LINES,
    "lightning.fabric.utilities.rank_zero": LIGHTNING_DEVICE_LINES,
    "torch.utils.cpp_extension": re.compile(r"No CUDA runtime is found"),
}
RANK_ZERO = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")


class DropLines(logging.Filter):
    """Drops the records of one logger whose message matches ``pattern`` (at its start)."""

    def __init__(self, pattern: re.Pattern):
        super().__init__()
        self.pattern = pattern

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.match(record.getMessage())


def _add_filter(name: str, kind: type, *args) -> None:
    """``kind(*args)`` as a filter of the logger ``name``, once however often a process trains."""
    logger = logging.getLogger(name)
    if not any(type(f) is kind for f in logger.filters):
        logger.addFilter(kind(*args))


def has_gpu() -> bool:
    """A CUDA (or Apple MPS) device that Lightning's ``accelerator=auto`` would train on."""
    import torch

    mps = getattr(torch.backends, "mps", None)
    return torch.cuda.is_available() or bool(mps is not None and mps.is_available())


def device_line(precision: object, threads: int | None = None) -> str | None:
    """On a machine without a GPU: the one line that says so, ``no GPU: training on 2 CPU threads,
    bf16-mixed``, with Lightning's device lines and torch's ``No CUDA runtime`` note silenced from
    now on (:data:`NO_GPU_LINES`); None where a GPU is present (Lightning's own lines name it) and
    in every process of a multi-process run but the first (they would say it again)."""
    if has_gpu():
        return None
    import torch

    for name, pattern in NO_GPU_LINES.items():
        _add_filter(name, DropLines, pattern)
    if os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0")) != "0":
        return None
    n = threads or torch.get_num_threads()
    return f"no GPU: training on {n} CPU thread{'' if n == 1 else 's'}, {precision}"


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
    for name in RANK_ZERO:
        _add_filter(name, _DropAdvert)
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


def epoch_name(current_epoch: int, max_epochs: int | None) -> str:
    """``Epoch 1/3`` for Lightning's 0-based ``current_epoch`` 0 of 3: counted from 1, as the epoch
    lines and the messages count (``Epoch 4`` when the run has no last epoch)."""
    last = f"/{max_epochs}" if max_epochs is not None and max_epochs > 0 else ""
    return f"Epoch {current_epoch + 1}{last}"


def progress_bar(run_name: str):
    """Lightning's default progress bar (Rich when installed, else tqdm) showing
    ``run: <run_name>`` instead of the logger's ``v_num``, and the epoch counted from 1
    (:func:`epoch_name`: ``Epoch 1/3``, where Lightning shows ``Epoch 0/2``)."""
    from lightning.pytorch.callbacks import TQDMProgressBar
    from lightning.pytorch.callbacks.progress.rich_progress import _RICH_AVAILABLE, RichProgressBar

    base = RichProgressBar if _RICH_AVAILABLE else TQDMProgressBar

    class NamedProgressBar(base):
        def get_metrics(self, trainer, pl_module):
            items = super().get_metrics(trainer, pl_module)
            items.pop("v_num", None)
            return {"run": run_name, **items}

        def _get_train_description(self, current_epoch: int) -> str:  # Rich's bar names its epoch here
            text = epoch_name(current_epoch, self.trainer.max_epochs)
            return f"{text:{len(self.validation_description)}}"  # as wide as "Validation": no flicker

        def on_train_epoch_start(self, trainer, *args) -> None:
            super().on_train_epoch_start(trainer, *args)
            if base is TQDMProgressBar:  # tqdm's bar names its epoch here
                self.train_progress_bar.set_description(epoch_name(trainer.current_epoch, trainer.max_epochs))

    return NamedProgressBar()


def summary_line(module) -> str:
    """One line in place of Lightning's model summary table."""
    model = module.model
    params = sum(p.numel() for p in model.parameters())
    pos = sum(p.numel() for p in model.pos.parameters())
    return f"model: {type(model).__name__}, {params / 1e3:.1f}k parameters ({pos / 1e3:.1f}k in the encoding)"
