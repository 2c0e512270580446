from .attention import Attention, Block, EncoderStack
from .network import network
from .vit import VisionTransformer

__all__ = ["Attention", "Block", "EncoderStack", "VisionTransformer", "network"]
