"""The models' options and defaults (``model=vit_cpu``, ``vit_micro``, ``seq_small``, ``timm``, ...): one
dataclass per model option.

A vitpos ViT (:class:`vitpos.models.vit.VisionTransformer`) and the sequence Transformer take these as their
arguments; ``model=timm`` converts a timm ``VisionTransformer`` (:mod:`vitpos.integrations.timm`), whose
patch, width and depth are its own. ``compile`` is speed only (no part of the run's identity).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class VitModel:
    """A ViT sized for CPU smoke runs and short budgets (~0.2M parameters, ``model=vit_micro``): patch 4 on
    32x32 images, an 8x8 grid of 64 tokens; plain patch tokens (no convolutional stem to leak position)."""

    patch_size: Any = 4
    dim: Any = 64
    depth: Any = 4
    num_heads: Any = 4
    mlp_ratio: Any = 2.0
    pool: Any = "gap"  # gap (average of the patch tokens) | cls (a class token)
    drop_path: Any = 0.0
    dropout: Any = 0.0
    compile: Any = False  # true: torch.compile the training forward (docs/performance.md)


@dataclass
class VitMicro(VitModel):
    """``model=vit_micro``: the ViT above as it is."""


@dataclass
class VitCpu(VitModel):
    """The default recipe's ViT, sized for a 10-minute run on a 2-core CPU (docs/results/recipe_ablation)."""

    compile: Any = True  # 1.5x the eager bf16 step here (docs/performance.md)


@dataclass
class VitCpuP2(VitCpu):
    """``vit_cpu`` with patch 2: 16x16 training images give the same 8x8 grid of 64 tokens (about the same cost
    a step) as ``vit_cpu`` on 32x32, and the native 32x32 test images a 16x16 grid (2x extrapolation with real
    detail): the native-resolution protocol (configs/experiment/extrapolation_native.yaml)."""

    patch_size: Any = 2


@dataclass
class VitTiny(VitModel):
    """~2.7M parameters, patch 4 on 32x32 (an 8x8 grid of 64 tokens)."""

    dim: Any = 192
    depth: Any = 6
    num_heads: Any = 3
    mlp_ratio: Any = 4.0
    drop_path: Any = 0.1


@dataclass
class VitSmall(VitTiny):
    """~10.7M parameters."""

    dim: Any = 384
    num_heads: Any = 6


@dataclass
class SeqSmall:
    """The sequence Transformer (~0.4M parameters); its training length comes from ``data.train_len``."""

    dim: Any = 128
    depth: Any = 2
    num_heads: Any = 4
    mlp_ratio: Any = 4.0
    causal: Any = False  # true: causal mask (ALiBi's setting; a symmetric ALiBi bias has no direction)
    zero_token_embeddings: Any = False
    embed_std: Any = 0.1  # token embedding init: between learned_1d's 0.02 and sincos_1d's amplitude 1
    dropout: Any = 0.0
    drop_path: Any = 0.0
    compile: Any = False


@dataclass
class TimmModel:
    """A timm ``VisionTransformer`` whose position handling and attention become the chosen encoding's."""

    name: Any = "vit_tiny_patch16_224"  # a timm.models.vision_transformer.VisionTransformer (timm.list_models)
    checkpoint: Any = None  # a timm state_dict file (.pth, .safetensors); null: timm's initialisation
    kwargs: Any = None  # more timm.create_model arguments: model.kwargs={depth:6,drop_path_rate:0.1}
    compile: Any = False
