"""The models' options and defaults (``model=vit_cpu``, ``seq_small``, ``timm``, ...): one dataclass per option,
the networks' arguments; ``model=timm`` converts a timm ``VisionTransformer`` (patch, width, depth its own).
"""

from __future__ import annotations

from typing import Any

from vitpos.config.rules import IMAGE, SEQUENCE, Flag, Int, Number, option, schema

DIM = Int(64, help="token width")
DEPTH = Int(4, help="Transformer blocks")
HEADS = Int(4, help="attention heads (model.dim must divide evenly)")
MLP_RATIO = Number(2.0, above=True, null=False, help="MLP width / model.dim")
DROP_PATH = Number(0.1, below=1, null=False, help="stochastic depth rate of the last block")
DROPOUT = Number(0.0, below=1, null=False, help="dropout after attention and MLP")
ZERO_TOKENS = Flag(task=SEQUENCE, help="token embeddings at zero: position alone")
COMPILE = Flag(defines=False, help="torch.compile the model (speed only)")


@schema
class VitModel:
    """A ViT sized for CPU smoke runs and short budgets (~0.2M parameters, ``model=vit_micro``): patch 4 on
    32x32 images, an 8x8 grid of 64 tokens; plain patch tokens (no convolutional stem to leak position)."""

    patch_size: Any = option(4, rule=Int(4, task=IMAGE, help="patch side in pixels"))
    dim: Any = option(64, rule=DIM)
    depth: Any = option(4, rule=DEPTH)
    num_heads: Any = option(4, rule=HEADS)
    mlp_ratio: Any = option(2.0, rule=MLP_RATIO)
    pool: Any = "gap"  # gap (average of the patch tokens) | cls (a class token)
    drop_path: Any = option(0.0, rule=DROP_PATH)
    dropout: Any = option(0.0, rule=DROPOUT)
    compile: Any = option(False, rule=COMPILE)  # true: torch.compile the training forward (docs/performance.md)


@schema
class VitMicro(VitModel):
    """``model=vit_micro``: the ViT above as it is."""


@schema
class VitCpu(VitModel):
    """The default recipe's ViT, sized for a 10-minute run on a 2-core CPU (docs/results/recipe_ablation)."""

    compile: Any = True  # 1.5x the eager bf16 step here (docs/performance.md)


@schema
class VitCpuP2(VitCpu):
    """``vit_cpu`` with patch 2: 16x16 training images give the same 8x8 grid of 64 tokens (about the same cost
    a step) as ``vit_cpu`` on 32x32, and the native 32x32 test images a 16x16 grid (2x extrapolation with real
    detail): the native-resolution protocol (configs/experiment/extrapolation_native.yaml)."""

    patch_size: Any = 2


@schema
class VitTiny(VitModel):
    """~2.7M parameters, patch 4 on 32x32 (an 8x8 grid of 64 tokens)."""

    dim: Any = 192
    depth: Any = 6
    num_heads: Any = 3
    mlp_ratio: Any = 4.0
    drop_path: Any = 0.1


@schema
class VitSmall(VitTiny):
    """~10.7M parameters."""

    dim: Any = 384
    num_heads: Any = 6


@schema
class SeqSmall:
    """The sequence Transformer (~0.4M parameters); its training length comes from ``data.train_len``."""

    dim: Any = option(128, rule=DIM)
    depth: Any = option(2, rule=DEPTH)
    num_heads: Any = option(4, rule=HEADS)
    mlp_ratio: Any = option(4.0, rule=MLP_RATIO)
    causal: Any = option(False, rule=Flag(task=SEQUENCE, help="causal attention mask"))  # ALiBi's setting (a
    #   symmetric ALiBi bias has no direction)
    zero_token_embeddings: Any = option(False, rule=ZERO_TOKENS)
    embed_std: Any = option(0.1, rule=Number(0.1, null=False, task=SEQUENCE, help="token embedding init std"))
    #   between learned_1d's 0.02 and sincos_1d's amplitude 1
    dropout: Any = option(0.0, rule=DROPOUT)
    drop_path: Any = option(0.0, rule=DROP_PATH)
    compile: Any = option(False, rule=COMPILE)


@schema
class TimmModel:
    """A timm ``VisionTransformer`` whose position handling and attention become the chosen encoding's."""

    name: Any = "vit_tiny_patch16_224"  # a timm.models.vision_transformer.VisionTransformer (timm.list_models)
    checkpoint: Any = None  # a timm state_dict file (.pth, .safetensors); null: timm's initialisation
    kwargs: Any = None  # more timm.create_model arguments: model.kwargs={depth:6,drop_path_rate:0.1}
    compile: Any = option(False, rule=COMPILE)
