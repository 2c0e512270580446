"""vitpos: positional encodings for Transformers you can train, compare and trust.

Packages: ``encodings`` (the registry and every encoding), ``models`` (ViT,
sequence Transformer), ``data``, ``tasks`` (LightningModules); tools:
``python -m vitpos.extrapolate``, ``python -m vitpos.compare``, ``python -m vitpos.viz``.
"""

import re
from importlib.metadata import version
from pathlib import Path

__version__ = "0.1.0"

#: The config groups Hydra composes (``train.yaml``, ``encoding/``, ``model/``, ...): package data that the
#: wheel ships, so an installed vitpos reads no repository folder (the repository's ``configs`` links here).
CONFIG_DIR = Path(__file__).resolve().parent / "configs"
#: keywords of ``hydra.main`` and ``initialize_config_dir``: Hydra 1.3 takes ``version_base`` (its 1.3 defaults, as
#: vitpos is written for), which Hydra 1.4 deprecates, keeping those defaults
HYDRA_1_3 = tuple(map(int, re.findall(r"\d+", version("hydra-core"))[:2])) < (1, 4)
HYDRA_BASE: dict = {"version_base": "1.3"} if HYDRA_1_3 else {}
