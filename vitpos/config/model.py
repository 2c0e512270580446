"""The models' options and defaults (``model=vit_cpu``, ``seq_small``, ``timm``, ...): the networks' arguments."""

from __future__ import annotations

from typing import Any

from vitpos.config.rules import IMAGE, SEQUENCE, Flag, Int, Number, option, schema, variant

COMPILE = Flag(defines=False, help="torch.compile the model (speed only)")


@schema
class Transformer:
    """What the ViT and the sequence Transformer share; these defaults make a ~0.2M-parameter ViT (vit_micro)."""

    dim: Any = option(64, "token width", Int(64))
    depth: Any = option(4, "Transformer blocks", Int(4))
    num_heads: Any = option(4, "attention heads (model.dim must divide evenly)", Int(4))
    mlp_ratio: Any = option(2.0, "MLP width / model.dim", Number(2.0, above=True, null=False))
    drop_path: Any = option(0.0, "stochastic depth rate of the last block", Number(0.1, below=1, null=False))
    dropout: Any = option(0.0, "dropout after attention and MLP", Number(0.0, below=1, null=False))
    compile: Any = option(False, rule=COMPILE)


@schema("model", "vit_micro")
class VitModel(Transformer):
    """``model=vit_micro`` and the base of every ViT option: patch 4 on 32x32 images, an 8x8 grid of 64 tokens;
    plain patch tokens (no convolutional stem to leak position)."""

    patch_size: Any = option(4, "patch side in pixels", Int(4, task=IMAGE))
    pool: Any = "gap"  # gap (average of the patch tokens) | cls (a class token)


VitMicro = VitModel
#: the default recipe's ViT, sized for a 10-minute run on a 2-core CPU (docs/results/recipe_ablation); compiled:
#: 1.5x the eager bf16 step there (docs/performance.md)
VitCpu = variant(VitModel, "model", "vit_cpu", compile=True)
#: patch 2: 16x16 training images give the same 8x8 grid of 64 tokens (about the same cost a step) as ``vit_cpu``
#: on 32x32, and the native 32x32 test images a 16x16 grid (2x extrapolation with real detail): the
#: native-resolution protocol (configs/experiment/extrapolation_native.yaml)
VitCpuP2 = variant(VitCpu, "model", "vit_cpu_p2", patch_size=2)
#: ~2.7M parameters, patch 4 on 32x32 (an 8x8 grid of 64 tokens)
VitTiny = variant(VitModel, "model", "vit_tiny", dim=192, depth=6, num_heads=3, mlp_ratio=4.0, drop_path=0.1)
#: ~10.7M parameters
VitSmall = variant(VitTiny, "model", "vit_small", dim=384, num_heads=6)


@schema("model", "seq_small")
class SeqSmall(Transformer):
    """The sequence Transformer (~0.4M parameters); its training length comes from ``data.train_len``."""

    dim: Any = 128
    depth: Any = 2
    mlp_ratio: Any = 4.0
    causal: Any = option(False, "causal attention mask", Flag(task=SEQUENCE))  # ALiBi's: a symmetric bias is undirected
    zero_token_embeddings: Any = option(False, "token embeddings at zero: position alone", Flag(task=SEQUENCE))
    embed_std: Any = option(0.1, "token embedding init std", Number(0.1, null=False, task=SEQUENCE))
    #   between learned_1d's 0.02 and sincos_1d's amplitude 1


@schema("model", "timm")
class TimmModel:
    """A timm ``VisionTransformer`` whose position handling and attention become the chosen encoding's."""

    name: Any = "vit_tiny_patch16_224"  # a timm.models.vision_transformer.VisionTransformer (timm.list_models)
    checkpoint: Any = None  # a timm state_dict file (.pth, .safetensors); null: timm's initialisation
    kwargs: Any = None  # more timm.create_model arguments: model.kwargs={depth:6,drop_path_rate:0.1}
    compile: Any = option(False, rule=COMPILE)
