"""What every task module shares: loading a checkpoint as data, never as code."""

from __future__ import annotations

import lightning as L


class TaskModule(L.LightningModule):
    """A LightningModule whose ``load_from_checkpoint`` defaults to
    ``weights_only=True``: the checkpoint's config is stored as plain
    containers, so nothing in it needs unpickling, and a crafted file is
    refused instead of executed (``torch.load`` docs, "weights_only")."""

    @classmethod
    def load_from_checkpoint(cls, checkpoint_path, *args, weights_only: bool = True, **kwargs):
        return super().load_from_checkpoint(checkpoint_path, *args, weights_only=weights_only, **kwargs)
