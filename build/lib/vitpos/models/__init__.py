from .attention import Attention, Block, EncoderStack
from .vit import VisionTransformer

__all__ = ["Attention", "Block", "EncoderStack", "VisionTransformer"]
