"""Lightning callbacks: pictures in TensorBoard, and the run lifecycle (per-epoch
seeding for exact resume, the best checkpoint named by its 1-based epoch, atomic last.ckpt
every epoch, the divergence guard, a line per epoch in a log); and the checkpoint writer every
Trainer of a run uses (:class:`AtomicCheckpointIO`).

Epochs a person reads count from 1, as the progress bar does (``Epoch 1/3``): in the messages,
the per-epoch lines and the best checkpoint's name (``best-epoch001.ckpt`` is the first epoch)."""

from __future__ import annotations

import io
import math
import time

import lightning as L
import torch
from lightning.pytorch.callbacks import Checkpoint, ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO

from vitpos.errors import DivergenceError
from vitpos.files import atomic_path, atomic_write_bytes
from vitpos.run.status import write_status


class PicturesCallback(L.Callback):
    """Logs ``vitpos.viz.pictures_for`` images to TensorBoard at the end of
    training, and every ``every_n_epochs`` epochs when > 0."""

    def __init__(self, every_n_epochs: int = 0, num_images: int = 4):
        self.every_n_epochs, self.num_images = every_n_epochs, num_images

    def _log(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        experiment = getattr(trainer.logger, "experiment", None)
        if experiment is None or not hasattr(experiment, "add_image") or not trainer.is_global_zero:
            return
        from vitpos.viz import pictures_for

        samples = None
        dm = trainer.datamodule
        if dm is not None and getattr(dm, "test", None) is not None and hasattr(dm, "prepare_batch"):
            batch = tuple(t[: self.num_images] for t in dm.test)
            samples = dm.prepare_batch(batch, train=False)[0].to(module.device)
        was_training = module.training
        module.eval()
        with torch.no_grad():
            pictures = pictures_for(module.model, samples)
        module.train(was_training)
        for name, image in pictures.items():
            experiment.add_image(f"pictures/{name}", image, trainer.global_step, dataformats="HWC")

    def on_train_epoch_end(self, trainer, module):
        n = self.every_n_epochs
        if n > 0 and (trainer.current_epoch + 1) % n == 0:
            self._log(trainer, module)

    def on_train_end(self, trainer, module):
        if getattr(trainer, "fast_dev_run", False):
            return
        self._log(trainer, module)


# ------------------------------------------------------------- run lifecycle
class EpochSeed(L.Callback):
    """Exact resume: at the start of every epoch, reseed the global RNGs
    (torch incl. CUDA, numpy, random: augmentation, dropout, drop-path, mixup)
    and the training sampler from ``(seed, epoch, rank)`` alone.

    A run resumed from an epoch-end checkpoint then replays the next epoch with
    exactly the random numbers an uninterrupted run draws, so on CPU the final
    weights are bitwise identical. One reseed per epoch: no per-step cost.
    """

    def __init__(self, seed: int):
        self.seed = int(seed)

    def on_train_epoch_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        import random

        import numpy as np

        from vitpos.data.memory import epoch_seed

        epoch = trainer.current_epoch
        seed = epoch_seed(self.seed, epoch, trainer.global_rank)
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)
        loader = trainer.train_dataloader  # its iterator is created after this hook
        for obj in (getattr(loader, "sampler", None), getattr(getattr(loader, "batch_sampler", None), "sampler", None)):
            if callable(getattr(obj, "set_epoch", None)):
                obj.set_epoch(epoch)


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer, writing every checkpoint (best and ``last.ckpt``) beside its
    destination and renaming it into place (:func:`vitpos.files.atomic_write_bytes`).

    Lightning's own writer stages the file in the system temporary folder and then moves it,
    which on another file system is a copy: a full run folder then gets a torn checkpoint, and a
    full ``/tmp`` fails a run whose folder has room. Here a write that fails part-way (no space,
    ``ulimit -f``, a read-only folder) leaves the previous checkpoint as it was and raises one
    :class:`vitpos.files.WriteError` naming the checkpoint. The bytes are serialized in memory
    first, as Lightning does, so a disk error arrives as an ``OSError`` with its errno."""

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        buffer = io.BytesIO()
        torch.save(checkpoint, buffer)
        atomic_write_bytes(path, buffer.getbuffer())


class BestCheckpoint(ModelCheckpoint):
    """Lightning's best-by-``val/acc`` checkpoint, its file named by the 1-based epoch
    (``best-epoch003.ckpt`` after the third epoch, the epoch the bar called ``Epoch 3/N``).

    Lightning fills ``{epoch}`` with its 0-based ``current_epoch``; runs saved before this naming
    carry that number, and every tool still finds them (:data:`vitpos.run.checkpoint.BEST`)."""

    def format_checkpoint_name(self, metrics: dict, filename=None, ver=None, prefix=None) -> str:
        if "epoch" in metrics:
            metrics = {**metrics, "epoch": metrics["epoch"] + 1}
        return super().format_checkpoint_name(metrics, filename, ver, prefix)


class LastCheckpoint(Checkpoint):
    """Writes ``last.ckpt`` at the end of every training epoch, atomically
    (:class:`AtomicCheckpointIO`; else to ``last.ckpt.tmp``, then renamed), so a kill or a
    full disk never leaves a torn file.

    After the best-by-``val/acc`` checkpoint has decided on this epoch: ModelCheckpoint decides in
    its own ``on_train_epoch_end``, and Lightning calls that hook of checkpoint callbacks (a
    :class:`~lightning.pytorch.callbacks.Checkpoint`, as this one is) after every other callback's,
    in the order they were given (train.py gives ModelCheckpoint first). A plain callback would
    save the best bookkeeping of the epoch before, and a run resumed from it would take its next
    epoch for the best even when it is not (its test score then differs from an uninterrupted run's).

    On SIGINT/SIGTERM nothing is written over it: ``last.ckpt`` stays the end
    of the last finished epoch, the point from which a rerun continues exactly
    (a mid-epoch state could not be replayed bit for bit, see EpochSeed); rank 0 says so in one line.
    """

    def __init__(self, path):
        from pathlib import Path

        self.path = Path(path)

    def on_train_epoch_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if trainer.sanity_checking or trainer.fast_dev_run:
            return
        if isinstance(trainer.strategy.checkpoint_io, AtomicCheckpointIO):  # atomic by itself (train.py's)
            trainer.save_checkpoint(self.path, weights_only=False)  # the full state
            return
        # every rank names the same file (save_checkpoint is collective: rank 0 writes, rank 0 renames)
        with atomic_path(self.path, unique=False, commit=trainer.is_global_zero) as tmp:
            trainer.save_checkpoint(tmp, weights_only=False)

    def on_exception(self, trainer: L.Trainer, module: L.LightningModule, exception: BaseException) -> None:
        """SIGINT, or SIGTERM (Lightning's SIGTERMException): say which epoch a rerun continues from."""
        if isinstance(exception, (KeyboardInterrupt, SystemExit)) and trainer.is_global_zero:
            print(self.interrupted_message(trainer.current_epoch), flush=True)

    def interrupted_message(self, epoch: int) -> str:
        """The line a stopped run prints; ``epoch`` is Lightning's 0-based ``current_epoch``, and the
        line counts from 1, as the per-epoch console lines do (``epoch 3/6`` is ``current_epoch`` 2)."""
        where = f"{self.path} holds the end of epoch {epoch}" if self.path.exists() else "no epoch finished"
        return f"interrupted during epoch {epoch + 1}; {where}. Rerun the same command to continue exactly from there"


class DivergenceGuard(L.Callback):
    """Stops a run that diverged, before anything after the divergence is saved.

    Three signs, each documented in the error it raises:

    - a non-finite ``train/loss`` or ``val/loss``;
    - a finite but runaway ``train/loss``: above ``LOSS_BOUND`` x ln(classes),
      ten times the loss of a uniform guess (a sane run starts near ln(classes)
      and only goes down; ``optim.lr=100`` reaches 1e6);
    - a collapse: ``val/acc`` back at chance (within ``CHANCE_MARGIN``) after it
      was clearly above it (``CLEARLY_ABOVE`` of the way from chance to 100%).

    The loss check keeps a flag on the loss's device and reads it on CPU every
    step, on accelerators every ``every_n_steps`` steps and at each epoch's last
    batch (one host sync per check; every rank decides together, so DDP never
    hangs). It runs before validation and before ModelCheckpoint (which
    Lightning orders last), and the validation check runs before
    ModelCheckpoint's, so diverged weights are never saved as best or last.
    """

    LOSS_BOUND = 10.0
    CHANCE_MARGIN = 0.02
    CLEARLY_ABOVE = 0.25

    def __init__(self, hint: str, every_n_steps: int = 20, folder=None):
        self.hint, self.every_n_steps, self.folder = hint, max(int(every_n_steps), 1), folder
        self._bad: torch.Tensor | None = None
        self.classes: int | None = None
        self.best_val_acc = 0.0

    def on_fit_start(self, trainer, module) -> None:
        from torchmetrics.classification import MulticlassAccuracy

        found = [m.num_classes for m in module.modules() if isinstance(m, MulticlassAccuracy)]
        self.classes = found[0] if found else None

    @property
    def loss_bound(self) -> float:
        return self.LOSS_BOUND * math.log(self.classes) if self.classes and self.classes > 1 else math.inf

    def _fail(self, what: str, trainer: L.Trainer) -> None:
        raise DivergenceError(
            f"training diverged: {what} at epoch {trainer.current_epoch + 1}, step {trainer.global_step}. "
            f"Likely cause: {self.hint}"
        )

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if not isinstance(loss, torch.Tensor):
            return
        loss = loss.detach()
        bad = ~torch.isfinite(loss).all() | (loss.float().max() > self.loss_bound)
        self._bad = bad if self._bad is None else self._bad | bad
        last = batch_idx + 1 >= trainer.num_training_batches
        if loss.device.type == "cpu" or last or trainer.global_step % self.every_n_steps == 0:
            flag, self._bad = bool(self._bad.item()), None
            if trainer.strategy.reduce_boolean_decision(flag, all=False):
                self._fail(
                    f"train/loss is not finite or above {self.loss_bound:.1f} "
                    f"({self.LOSS_BOUND:g} x ln {self.classes} classes, the loss of a uniform guess)",
                    trainer,
                )

    def on_validation_end(self, trainer, module) -> None:
        if trainer.sanity_checking:
            return
        value = trainer.callback_metrics.get("val/loss")
        if value is not None and not torch.isfinite(value).all():
            self._fail("val/loss is not finite", trainer)
        acc = trainer.callback_metrics.get("val/acc")
        if acc is None or not self.classes:
            return
        acc, chance = float(acc), 1.0 / self.classes
        if self.best_val_acc >= chance + self.CLEARLY_ABOVE * (1 - chance) and acc <= chance + self.CHANCE_MARGIN:
            self._fail(f"val/acc fell to chance ({acc:.3f}, chance {chance:.3f}) from {self.best_val_acc:.3f}", trainer)
        self.best_val_acc = max(self.best_val_acc, acc)

    def on_exception(self, trainer, module, exception: BaseException) -> None:
        """A divergence, on rank 0: marked on the run's TensorBoard curves and, where the run has a ``folder``,
        in its ``metrics.json`` (a rerun refuses it: :func:`vitpos.run.plan.decide`). Lightning then closes
        the logger as failed."""
        if not isinstance(exception, DivergenceError) or not trainer.is_global_zero:
            return
        if trainer.logger is not None:
            trainer.logger.experiment.add_scalar("run/diverged", 1.0, trainer.global_step)
            trainer.logger.experiment.add_text("run/status", f"diverged: {exception}", trainer.global_step)
        if self.folder is not None:
            epoch, step = trainer.current_epoch, trainer.global_step
            write_status(self.folder, "diverged", reason=str(exception), epoch=epoch, step=step)

    def state_dict(self) -> dict:
        return {"best_val_acc": self.best_val_acc}

    def load_state_dict(self, state_dict: dict) -> None:
        self.best_val_acc = float(state_dict.get("best_val_acc", 0.0))


def divergence_hint(cfg) -> str:
    """The options most likely to blame, with their values: ``optim.lr`` and the
    encoding's numeric options (``encoding.base``, scales, ...)."""
    parts = [f"optim.lr={cfg.optim.lr} too high (try a 10x smaller value)"]
    enc = [
        f"encoding.{k}={v}"
        for k, v in cfg.encoding.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in ("name",)
    ]
    if enc:
        parts.append(f"or an encoding option out of range ({', '.join(enc)})")
    return " ".join(parts)


class EpochLine(L.Callback):
    """One line per epoch where no progress bar is shown (``trainer.enable_progress_bar=false``, as
    in the sweep configs, or standard output that is not a terminal: a log file, a pipe), so that a
    long run is never silent: the epoch (from 1), the training steps per second of that epoch, the
    losses and validation accuracy, and the minutes since the fit started.

    Printed when the training epoch ends, after its validation when there is one (Lightning
    validates inside the epoch), so every epoch gets its line; the step rate counts the epoch's
    steps up to their last batch, without the validation."""

    def __init__(self, run_name: str):
        self.run_name = run_name
        self.start = self.epoch_start = self.last_batch = 0.0
        self.first_step = 0

    def on_train_start(self, trainer, module) -> None:
        self.start = time.perf_counter()

    def on_train_epoch_start(self, trainer, module) -> None:
        self.epoch_start = self.last_batch = time.perf_counter()
        self.first_step = trainer.global_step

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        self.last_batch = time.perf_counter()

    def line(self, trainer) -> str:
        """``<run>: epoch 2/3  12.5 steps/s  train/loss 0.9000  val/loss ...  (1.2 min)``."""
        metrics = trainer.callback_metrics
        shown = "  ".join(f"{k} {float(metrics[k]):.4f}" for k in ("train/loss", "val/loss", "val/acc") if k in metrics)
        seconds = self.last_batch - self.epoch_start
        steps = trainer.global_step - self.first_step
        rate = f"{steps / seconds:.1f} steps/s" if seconds > 0 and steps > 0 else "no steps"
        minutes = (time.perf_counter() - self.start) / 60
        total = f"/{trainer.max_epochs}" if trainer.max_epochs and trainer.max_epochs > 0 else ""
        return f"{self.run_name}: epoch {trainer.current_epoch + 1}{total}  {rate}  {shown}  ({minutes:.1f} min)"

    def on_train_epoch_end(self, trainer, module) -> None:
        if trainer.is_global_zero:
            print(self.line(trainer), flush=True)
