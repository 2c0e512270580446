"""A learned scale on a fixed 2D sin-cos table: an example plug-in encoding (one file)."""

import torch
from torch import nn

from vitpos.encodings import PositionalEncoding, register


@register
class ScaledSinCos(PositionalEncoding):
    name = "scaled_sincos"
    strategies = ("interpolate",)  # any grid: the table is a formula of the positions
    grid_dims = (2,)

    def __init__(self, ctx, strategy=None, temperature: float = 10000.0):
        super().__init__(ctx, strategy)
        self.temperature = temperature
        self.scale = nn.Parameter(torch.ones(()))

    def add_to_tokens(self, x, grid):
        h, w = grid
        d = x.shape[-1] // 4
        omega = 1.0 / self.temperature ** (torch.arange(d, device=x.device) / d)
        ys, xs = torch.meshgrid(torch.arange(h, device=x.device), torch.arange(w, device=x.device), indexing="ij")
        angles_y, angles_x = ys.flatten()[:, None] * omega, xs.flatten()[:, None] * omega  # (N, D/4)
        table = torch.cat([angles_y.sin(), angles_y.cos(), angles_x.sin(), angles_x.cos()], dim=-1)  # (N, D)
        return x + self.scale * table.to(x.dtype)
