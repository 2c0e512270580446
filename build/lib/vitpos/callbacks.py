"""Lightning callbacks: pictures of the encoding and attention in TensorBoard."""

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
