"""A small Vision Transformer whose position information comes only from a
pluggable :class:`~vitpos.encodings.PositionalEncoding` (Dosovitskiy et al. 2021)."""

from __future__ import annotations

import torch
from timm.layers import trunc_normal_
from torch import nn

from vitpos.encodings import EncodingContext, OptionError, create_encoding, option_group
from vitpos.sizes import patch_grid, tiles

from .attention import EncoderStack, check_heads


class VisionTransformer(nn.Module):
    """Conv patch embedding -> [encoding] -> pre-norm blocks -> norm -> pool -> head.

    ``pool``: ``gap`` (global average pooling, default, as big_vision's small
    models) or ``cls`` (a class token, concatenated *after* absolute encodings
    are added and never rotated). ``encoding`` is a dict: ``{name: ..., **options}``.
    ``img_size``: the training size, a side or ``(h, w)``; its grid, ``(h // p, w // p)``, is the
    encoding's training grid. Any image whose sides ``patch_size`` divides works; the encoding
    decides what a grid other than the training grid means.
    """

    @option_group("model")  # its options' errors read model.<option>; the encoding's keep encoding.<option>
    def __init__(
        self,
        encoding: dict | str = "sincos_2d",
        img_size: int | tuple[int, int] = 32,
        patch_size: int = 4,
        in_chans: int = 3,
        num_classes: int = 10,
        dim: int = 192,
        depth: int = 6,
        num_heads: int = 3,
        mlp_ratio: float = 4.0,
        pool: str = "gap",
        drop_path: float = 0.1,
        dropout: float = 0.0,
    ):
        super().__init__()
        if pool not in ("gap", "cls"):
            raise OptionError("pool", f"unknown pool {pool!r}", "valid: gap, cls")
        grid = patch_grid(img_size, patch_size, "data.img_size")  # (rows, columns) of patches
        self.patch_size, self.pool = patch_size, pool
        self.patch_embed = nn.Conv2d(in_chans, dim, patch_size, stride=patch_size)
        self.num_prefix_tokens = 1 if pool == "cls" else 0
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim)) if pool == "cls" else None
        check_heads(dim, num_heads)  # before the encoding, whose head-width rules assume it
        enc = {"name": encoding} if isinstance(encoding, str) else dict(encoding)
        ctx = EncodingContext(
            dim=dim, num_heads=num_heads, depth=depth, grid=grid, num_prefix_tokens=self.num_prefix_tokens
        )
        self.pos = create_encoding(enc.pop("name"), ctx, **enc)
        self.encoder = EncoderStack(dim, depth, num_heads, mlp_ratio, drop_path, dropout)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)
        self.apply(_init_weights)
        if self.cls_token is not None:
            trunc_normal_(self.cls_token, std=0.02)

    def grid_for(self, images: torch.Tensor) -> tuple[int, int]:
        """The token grid ``(h // p, w // p)`` of images ``(B, C, h, w)``: rows, then columns."""
        h, w = images.shape[-2:]
        p = self.patch_size
        if not tiles(h, w, p, p):
            raise ValueError(f"image size {h}x{w} is not a multiple of model.patch_size={p}; pick a multiple of {p}")
        return h // p, w // p

    def tokens(self, images: torch.Tensor):
        """Patch tokens with absolute encoding and prefix: (B, P + N, D), grid."""
        grid = self.grid_for(images)
        x = self.patch_embed(images).flatten(2).transpose(1, 2)  # (B, N, D), row-major grid
        x = self.pos.add_to_tokens(x, grid)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)  # (B, 1 + N, D)
        return x, grid

    def forward_features(self, images: torch.Tensor) -> torch.Tensor:
        x, grid = self.tokens(images)
        x = self.norm(self.encoder(x, grid, self.pos))
        return x[:, 0] if self.pool == "cls" else x.mean(1)  # (B, D)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.forward_features(images))  # (B, classes)

    @torch.no_grad()
    def attention_maps(self, images: torch.Tensor) -> list[torch.Tensor]:
        """Softmax attention (B, H, P + N, P + N) of every block."""
        x, grid = self.tokens(images)
        return self.encoder(x, grid, self.pos, return_attention=True)[1]

    def no_weight_decay(self) -> set[str]:
        """Parameters without weight decay: position parameters, the class token
        (norms and biases are excluded by the optimizer by their ndim)."""
        names = {f"pos.{n}" for n in self.pos.no_weight_decay()}
        return names | ({"cls_token"} if self.cls_token is not None else set())


def _init_weights(m: nn.Module) -> None:
    if isinstance(m, nn.Linear):
        trunc_normal_(m.weight, std=0.02)
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.LayerNorm):
        nn.init.ones_(m.weight)
        nn.init.zeros_(m.bias)
