"""Pictures of positional encodings and of attention, as RGB arrays.

Every picture is an ``np.ndarray`` (height, width, 3) of ``uint8``, rendered
off screen by Matplotlib: log it with
``SummaryWriter.add_image(tag, img, step, dataformats="HWC")`` or save it as a
PNG. Functions take a ``VisionTransformer`` (or its encoding ``model.pos``) and
a token grid (default: the training grid); ``*_data`` twins return the numbers.

    python -m vitpos.viz ckpt=runs/.../last.ckpt out=viz/   # a trained model
    python -m vitpos.viz encoding=rope_2d_mixed out=viz/     # a fresh one

>>> from vitpos.models import VisionTransformer
>>> from vitpos.viz import pictures_for
>>> sorted(pictures_for(VisionTransformer("sincos_2d", dim=32, depth=1, num_heads=2)))
['pos/similarity', 'pos/table']
"""

from .attention import attention_distance_data, attention_maps, attention_maps_data, mean_attention_distance
from .encoding import (
    bias_data,
    bias_vs_offset,
    position_similarity,
    position_similarity_data,
    position_table,
    rope_logit_data,
    rope_logit_vs_offset,
    rope_mixed_directions,
    table_heatmap,
)
from .pictures import pictures_for
from .render import hooks_of, to_image

__all__ = [
    "attention_distance_data",
    "attention_maps",
    "attention_maps_data",
    "bias_data",
    "bias_vs_offset",
    "hooks_of",
    "mean_attention_distance",
    "pictures_for",
    "position_similarity",
    "position_similarity_data",
    "position_table",
    "rope_logit_data",
    "rope_logit_vs_offset",
    "rope_mixed_directions",
    "table_heatmap",
    "to_image",
]
