"""What a command prints: a user error as one line (:func:`run_main`), and a quiet training console: without a GPU
Lightning's device lines become one (:func:`device_line`), epochs count from 1, a bar is drawn only on a terminal."""

from __future__ import annotations

import logging
import os
import re
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from vitpos.errors import InputError


def run_main(main: Callable[[list[str] | None], int | None], argv: list[str] | None = None) -> None:
    """``sys.exit(main(argv))``, but an :class:`InputError` prints ``error: <message>`` and exits 2 (no traceback)."""
    try:
        code = main(argv)
    except InputError as err:
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

RANK_ZERO = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")
ADVERT = re.compile(r".*(litlogger|tensorboardX|to estimate number of stepping)", re.S)  # Lightning's tips: dropped
#: dropped without a GPU only (:func:`device_line` says it in one line): Lightning's device and AMP lines, torch's
#: CUDA_HOME note (cpp_extension, imported by torch.compile)
LIGHTNING_DEVICE_LINES = re.compile(
    r"(GPU|TPU|HPU|IPU) available: False\b|Using (16bit|bfloat16) Automatic Mixed Precision \(AMP\)$"
)
NO_GPU_LINES = dict.fromkeys(RANK_ZERO, LIGHTNING_DEVICE_LINES)
NO_GPU_LINES["torch.utils.cpp_extension"] = re.compile(r"No CUDA runtime is found")


@dataclass
class DropLines(logging.Filter):
    """Drops records whose message starts with a match of ``pattern``; ``Logger.addFilter`` adds an equal one once."""

    pattern: re.Pattern

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.match(record.getMessage())


def has_gpu() -> bool:
    """A CUDA or MPS device is there (what ``accelerator=auto`` would pick)."""
    import torch

    return torch.cuda.is_available() or torch.backends.mps.is_available()


def device_line(precision: object, threads: int | None = None) -> str | None:
    """``no GPU: training on 2 CPU threads, bf16-mixed``, silencing :data:`NO_GPU_LINES` from now on; None with a GPU
    (Lightning's lines name it) and on every rank but the first."""
    if has_gpu():
        return None
    import torch

    for name, pattern in NO_GPU_LINES.items():
        logging.getLogger(name).addFilter(DropLines(pattern))
    if os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0")) != "0":
        return None
    n = threads or torch.get_num_threads()
    return f"no GPU: training on {n} CPU thread{'' if n == 1 else 's'}, {precision}"


class _Stderr(logging.StreamHandler):
    """Writes to the current ``sys.stderr``: a swapped one (``capsys``) gets the lines, a closed one is never used."""

    stream = property(lambda self: sys.stderr, lambda self, _value: None)  # StreamHandler.__init__ assigns it


def quiet_console(side_by_side: bool = False) -> None:
    """Silences :data:`KNOWN_WARNINGS`, sets up the ``vitpos`` logger (once); ``side_by_side`` (parallel jobs): only
    warnings, errors and labelled lines (``<run>/seed<k>: epoch ...``)."""
    for message, _why in KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", message=message)
    for name in RANK_ZERO:
        logging.getLogger(name).addFilter(DropLines(ADVERT))
    log = logging.getLogger("vitpos")
    if not log.handlers:
        handler = _Stderr()
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    for name in ("lightning.pytorch", "lightning.fabric", "vitpos") if side_by_side else ():
        logging.getLogger(name).setLevel(logging.WARNING)


def epoch_name(current_epoch: int, max_epochs: int | None) -> str:
    """``Epoch 1/3`` for Lightning's ``current_epoch`` 0 of 3; ``Epoch 4`` without a last epoch."""
    last = f"/{max_epochs}" if max_epochs is not None and max_epochs > 0 else ""
    return f"Epoch {current_epoch + 1}{last}"


def shows_bar(wanted: bool) -> bool:
    """Asked for and standard output is a terminal: redirected, a bar writes nothing readable until the run ends."""
    return bool(wanted) and bool(getattr(sys.stdout, "isatty", lambda: False)())


def progress_bar(run_name: str):
    """Lightning's default bar (Rich, else tqdm) with ``run: <run_name>`` for ``v_num`` and :func:`epoch_name`."""
    from importlib.util import find_spec

    from lightning.pytorch.callbacks import RichProgressBar, TQDMProgressBar

    class NamedProgressBar(RichProgressBar if find_spec("rich") else TQDMProgressBar):
        def get_metrics(self, trainer, pl_module):
            items = super().get_metrics(trainer, pl_module)
            items.pop("v_num", None)
            return {"run": run_name, **items}

        def on_train_epoch_start(self, trainer, *args) -> None:
            super().on_train_epoch_start(trainer, *args)
            self.name_epoch(trainer)

        def on_train_batch_end(self, trainer, *args) -> None:  # resumed mid-epoch, Rich's bar starts here
            super().on_train_batch_end(trainer, *args)
            self.name_epoch(trainer)

        def name_epoch(self, trainer) -> None:
            text = epoch_name(trainer.current_epoch, trainer.max_epochs)
            if isinstance(self, TQDMProgressBar):
                self.train_progress_bar.set_description(text, refresh=False)
            elif self.train_progress_bar_id is not None:  # Rich's: as wide as "Validation", no flicker
                self.train_progress_bar.description = f"{text:{len(self.validation_description)}}"

    return NamedProgressBar()


def summary_line(module) -> str:
    """One line in place of Lightning's model summary table."""
    params, pos = (sum(p.numel() for p in m.parameters()) / 1e3 for m in (module.model, module.model.pos))
    return f"model: {type(module.model).__name__}, {params:.1f}k parameters ({pos:.1f}k in the encoding)"
