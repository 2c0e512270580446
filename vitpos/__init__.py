"""vitpos: positional encodings for Transformers you can train, compare and trust.

Packages: ``encodings`` (the registry and every encoding), ``models`` (ViT,
sequence Transformer), ``data``, ``tasks`` (LightningModules); tools:
``python -m vitpos.extrapolate``, ``python -m vitpos.compare``, ``python -m vitpos.viz``.
"""

from pathlib import Path

__version__ = "0.1.0"

#: The config groups Hydra composes (``train.yaml``, ``encoding/``, ``model/``, ...): package data that the
#: wheel ships, so an installed vitpos reads no repository folder (the repository's ``configs`` links here).
CONFIG_DIR = Path(__file__).resolve().parent / "configs"
