"""Loading checkpoints without running code from them.

``torch.load(..., weights_only=False)`` unpickles arbitrary objects, so a crafted
``.ckpt`` can run any command on the machine that opens it. vitpos checkpoints
hold only tensors and plain containers (the run's config is saved with
``OmegaConf.to_container``), so every tool loads them with
``weights_only=True`` (PyTorch's restricted unpickler) and turns each way a file
can fail into one :class:`CheckpointError` that names the file.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import torch

from vitpos.errors import CheckpointError  # noqa: E402,F401  (raised here; imported from here by callers)


def load_checkpoint(path: str | Path) -> dict:
    """The checkpoint at ``path`` as a dict, loaded on the CPU with ``weights_only=True``.

    Raises :class:`CheckpointError` (never runs code from the file) when the
    file is missing, truncated or corrupt, needs arbitrary Python objects to
    unpickle, or lacks the run config (``hyper_parameters.cfg``) the tools
    rebuild the model from.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"ckpt={path}: no such file")
    with open(path, "rb") as f:
        head = f.read(4)
    if head[:4] != b"PK\x03\x04" and head[:1] != b"\x80":  # torch.save's zip format, or a legacy pickle
        raise CheckpointError(
            f"ckpt={path}: not a checkpoint ({'an empty file' if not head else 'not a PyTorch file'}); "
            "pass a .ckpt written by a vitpos run, e.g. <run folder>/checkpoints/last.ckpt"
        )
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(
            f"ckpt={path}: refused: it holds Python objects that only an unrestricted unpickler "
            f"would build (weights_only=True said: {first[:200]}). vitpos checkpoints hold only tensors "
            "and plain containers; this file was not written by vitpos, or was tampered with."
        ) from None
    except (RuntimeError, EOFError, OSError, ValueError) as err:
        raise CheckpointError(f"ckpt={path}: not a readable checkpoint (truncated or corrupt?): {err}") from None
    hparams = checkpoint.get("hyper_parameters") if isinstance(checkpoint, dict) else None
    cfg = hparams.get("cfg") if isinstance(hparams, dict) else None
    if not isinstance(cfg, dict) or "state_dict" not in checkpoint:
        raise CheckpointError(
            f"ckpt={path}: not a vitpos checkpoint (no state_dict, or no hyper_parameters.cfg to rebuild the run from)"
        )
    return checkpoint


def task_kind(cfg: dict) -> str:
    """``"len"`` for a sequence run, ``"res"`` for an image run (older configs lack ``task``)."""
    task = (cfg.get("task") or {}).get("name")
    if task is None:
        task = "sequence" if "train_len" in (cfg.get("data") or {}) else "classification"
    return "len" if task == "sequence" else "res"
