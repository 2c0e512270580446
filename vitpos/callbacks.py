"""Lightning callbacks: pictures in TensorBoard, and the run lifecycle (per-epoch
seeding for exact resume, atomic last.ckpt every epoch, the divergence guard)."""

from __future__ import annotations

import lightning as L
import torch


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


class LastCheckpoint(L.Callback):
    """Writes ``last.ckpt`` at the end of every training epoch (after
    validation, so it holds the best-checkpoint bookkeeping too), atomically:
    to ``last.ckpt.tmp``, then renamed, so a kill never leaves a torn file.

    On SIGINT/SIGTERM nothing is written over it: ``last.ckpt`` stays the end
    of the last finished epoch, the point from which a rerun continues exactly
    (a mid-epoch state could not be replayed bit for bit, see EpochSeed).
    """

    def __init__(self, path):
        from pathlib import Path

        self.path = Path(path)
        self.interrupted: BaseException | None = None

    def on_train_epoch_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        import os

        if trainer.sanity_checking or trainer.fast_dev_run:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        trainer.save_checkpoint(tmp, weights_only=False)  # the full state; collective: rank 0 writes
        if trainer.is_global_zero:
            os.replace(tmp, self.path)

    def on_exception(self, trainer: L.Trainer, module: L.LightningModule, exception: BaseException) -> None:
        if isinstance(exception, (KeyboardInterrupt, SystemExit)):  # SIGINT; SIGTERM (Lightning's SIGTERMException)
            self.interrupted = exception

    def interrupted_message(self, epoch: int) -> str:
        where = f"{self.path} holds the end of epoch {epoch - 1}" if self.path.exists() else "no epoch finished"
        return f"interrupted during epoch {epoch}; {where}. Rerun the same command to continue exactly from there"


class DivergenceError(RuntimeError):
    """Training produced a non-finite loss; the message names the likely cause."""


class DivergenceGuard(L.Callback):
    """Stops the run at the first non-finite ``train/loss`` (or ``val/loss``).

    The check keeps a flag on the loss's device and reads it on CPU every step,
    on accelerators every ``every_n_steps`` steps and at each epoch's last batch
    (one host sync per check; every rank decides together, so DDP never hangs).
    It runs before validation and before ModelCheckpoint (which Lightning
    orders last), so non-finite weights are never saved as best or last.
    """

    def __init__(self, hint: str, every_n_steps: int = 20):
        self.hint, self.every_n_steps = hint, max(int(every_n_steps), 1)
        self._bad: torch.Tensor | None = None

    def _fail(self, what: str, trainer: L.Trainer) -> None:
        raise DivergenceError(
            f"training diverged: {what} is not finite at epoch {trainer.current_epoch}, step {trainer.global_step}. "
            f"Likely cause: {self.hint}"
        )

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if not isinstance(loss, torch.Tensor):
            return
        bad = ~torch.isfinite(loss.detach()).all()
        self._bad = bad if self._bad is None else self._bad | bad
        last = batch_idx + 1 >= trainer.num_training_batches
        if loss.device.type == "cpu" or last or trainer.global_step % self.every_n_steps == 0:
            flag, self._bad = bool(self._bad.item()), None
            if trainer.strategy.reduce_boolean_decision(flag, all=False):
                self._fail("train/loss", trainer)

    def on_validation_end(self, trainer, module) -> None:
        value = trainer.callback_metrics.get("val/loss")
        if not trainer.sanity_checking and value is not None and not torch.isfinite(value).all():
            self._fail("val/loss", trainer)


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
