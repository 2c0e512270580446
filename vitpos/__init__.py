"""vitpos: positional encodings for Transformers you can train, compare and trust.

Packages: ``encodings`` (the registry and every encoding), ``models`` (ViT,
sequence Transformer), ``data``, ``tasks`` (LightningModules); tools:
``python -m vitpos.extrapolate``, ``python -m vitpos.compare``, ``python -m vitpos.viz``.
"""

__version__ = "0.1.0"
