"""Any vitpos image encoding in a timm Vision Transformer, with its weights kept.

    model = timm.create_model("vit_tiny_patch16_224", pretrained=True)
    apply_encoding(model, "rope_2d_mixed")  # in place; model(images) at any size, h != w too

timm's ``VisionTransformer`` knows positions through one learned table, ``pos_embed``, added to
the tokens. :func:`apply_encoding` converts a built model so that its positions come from a
vitpos encoding instead, through the same three hooks vitpos's own ViT calls
(``vitpos/models/vit.py``): ``add_to_tokens`` on the patch tokens before the class and register
tokens are concatenated, ``rotate_qk`` after the heads are split (prefix tokens are never
rotated), ``attention_bias`` as a float mask of ``scaled_dot_product_attention``, and
``after_block``. Each block's attention becomes vitpos's ``Attention``
(``vitpos/models/attention.py``) holding timm's own ``qkv`` and ``proj`` layers, so no attention
is written twice.

Every weight that still applies is kept, under its timm name: patch embedding, class and register
tokens, the blocks (norms, qkv, proj, layer scales, MLP), the final norms and the head.
``pos_embed`` is carried into the absolute tables (``learned_1d`` exactly; ``learned_2d`` and
``learned_2d_sum`` as the nearest factorized table, in least squares), resampled by the
encoding's own strategy when its grid is not the model's; every other encoding drops it (a
``combo`` too, even with a learned part). Where timm's table has rows for the class and register
tokens (``no_embed_class=False``), those rows are constants added to constants, so they are added
to the tokens themselves: a model converted to ``learned_1d`` computes exactly what it computed
before.

The model's class becomes :class:`EncodedVisionTransformer`, a subclass of timm's
``VisionTransformer`` (so ``isinstance`` still holds); a model that cannot be converted raises
:class:`vitpos.errors.UserError` naming what to change, and is left as it was.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch
from timm.layers import Format, PatchEmbed
from timm.layers.attention import Attention as TimmAttention
from timm.models.vision_transformer import Block as TimmBlock
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from vitpos.encodings import EncodingContext, Grid, PositionalEncoding, create_encoding, get_encoding_class
from vitpos.encodings import list_encodings as registered
from vitpos.encodings.absolute import Learned1D, Learned2D, Learned2DSum
from vitpos.errors import UserError
from vitpos.models.attention import Attention, block_masks, mask_dtype
from vitpos.sizes import tiles

#: the encodings that take timm's pos_embed over: learned tables added to the tokens
TABLES = (Learned1D, Learned2D, Learned2DSum)


class EncodedVisionTransformer(VisionTransformer):
    """A timm ``VisionTransformer`` after :func:`apply_encoding`: its positions come from
    ``self.pos`` (a vitpos ``PositionalEncoding``), for images of any size the patch divides.

    ``forward``, ``forward_head``, pooling, ``reset_classifier`` and the state dict are timm's;
    ``forward_features`` runs timm's blocks with the encoding's hooks. Not supported:
    ``attn_mask``/``is_causal`` (the mask is the encoding's), ``forward_intermediates`` and
    gradient checkpointing. ``grid_for`` and ``attention_maps`` are those of vitpos's own ViT, so
    ``vitpos.viz`` draws a converted model as it draws one of its own."""

    pos: PositionalEncoding

    def grid_for(self, images: torch.Tensor) -> tuple[int, int]:
        """The token grid ``(rows, columns)`` of images ``(B, C, h, w)``."""
        h, w = images.shape[-2:]
        ph, pw = self.patch_embed.patch_size
        if self.patch_embed.dynamic_img_pad:  # timm pads the image up to whole patches
            return math.ceil(h / ph), math.ceil(w / pw)
        if not tiles(h, w, ph, pw):
            raise ValueError(f"image size {h}x{w} is not a multiple of the patch size {ph}x{pw}; pick a multiple")
        return h // ph, w // pw

    def tokens(self, images: torch.Tensor) -> tuple[torch.Tensor, Grid]:
        """Patch tokens with the absolute encoding, then the prefix: (B, P + N, D), and the grid."""
        grid = self.grid_for(images)
        x = self.patch_embed(images).flatten(1, 2)  # (B, h, w, D) -> (B, N, D), row-major grid
        x = self.pos.add_to_tokens(x, grid)
        prefix = [t.expand(x.shape[0], -1, -1) for t in (self.cls_token, self.reg_token) if t is not None]
        x = torch.cat([*prefix, x], dim=1)  # (B, P + N, D): class, registers, patches (timm's order)
        return self.pos_drop(x), grid

    def forward_features(self, x: torch.Tensor, attn_mask=None, is_causal: bool = False) -> torch.Tensor:
        if attn_mask is not None or is_causal:
            raise ValueError("a model converted by apply_encoding takes no attn_mask or is_causal: its encoding masks")
        x, grid = self.tokens(x)
        return self.norm(self.run_blocks(self.norm_pre(x), grid)[0])

    def attention_maps(self, images: torch.Tensor) -> list[torch.Tensor]:
        """Softmax attention (B, H, P + N, P + N) of every block, prefix tokens first: what vitpos's
        own ViT gives ``vitpos.viz`` (attention maps and distances) and the training pictures."""
        x, grid = self.tokens(images)
        return self.run_blocks(self.norm_pre(x), grid, return_attention=True)[1]

    def run_blocks(self, x: torch.Tensor, grid: Grid, return_attention: bool = False):
        """timm's blocks on the tokens ``x`` (B, P + N, D): each one timm's ``Block.forward`` with the
        grid, the encoding and the block's index for the attention. Returns the tokens and, with
        ``return_attention``, every block's softmax attention (else an empty list)."""
        masks = block_masks(self.pos, grid, len(self.blocks), x.shape[1], x.device, mask_dtype(x))
        maps = []
        for i, (blk, mask) in enumerate(zip(self.blocks, masks)):
            h = blk.norm1(x)
            if return_attention:
                maps.append(blk.attn.attention_probs(h, grid, self.pos, i, mask))
            x = x + blk.drop_path1(blk.ls1(blk.attn(h, grid, self.pos, i, mask)))
            x = x + blk.drop_path2(blk.ls2(blk.mlp(blk.norm2(x))))
            x = self.pos.after_block(x, grid, i)
        return x, maps

    def forward_intermediates(self, *args, **kwargs):
        raise NotImplementedError("forward_intermediates is not supported after apply_encoding; use forward_features")

    def no_weight_decay(self) -> set[str]:
        """timm's names (class and register tokens) and the encoding's position parameters."""
        return super().no_weight_decay() | {f"pos.{n}" for n in self.pos.no_weight_decay()}


def conversion_problem(model: nn.Module) -> tuple[str, str | None] | None:
    """Why ``model`` cannot be converted, or None when it can: ``(what is wrong, the timm
    constructor argument that fixes it, or None)``. Convertible: a timm ``VisionTransformer``
    (the class itself: subclasses have forwards of their own) with a ``PatchEmbed``, timm's
    ``Block``s and ``Attention`` without q/k norms or output norm, and no patch dropout (which
    would move tokens off their grid)."""
    kind = type(model).__name__
    if isinstance(model, EncodedVisionTransformer):
        return "already converted by apply_encoding", None
    if type(model) is not VisionTransformer:
        subclass = " (a subclass with a forward of its own)" if isinstance(model, VisionTransformer) else ""
        return f"{kind} is not a timm VisionTransformer{subclass}", None
    if type(model.patch_embed) is not PatchEmbed:
        return f"its patch embedding is a {type(model.patch_embed).__name__}, not timm's PatchEmbed", None
    if not isinstance(model.patch_drop, nn.Identity):
        return "its patch dropout moves tokens off their grid", "patch_drop_rate=0"
    for i, blk in enumerate(model.blocks):
        attn = getattr(blk, "attn", None)
        if type(blk) is not TimmBlock or type(attn) is not TimmAttention:
            return f"block {i} is a {type(blk).__name__} with a {type(attn).__name__}, not timm's Block/Attention", None
        unsupported = {  # what vitpos's attention has not -> (present, the argument without it)
            "q/k norms": (not isinstance(attn.q_norm, nn.Identity), "qk_norm=False"),
            "an output norm": (not isinstance(attn.norm, nn.Identity), "scale_attn_norm=False"),
            "a gate": (attn.gate is not None, None),
            "heads of another width than embed_dim": (attn.attn_dim != model.embed_dim, None),
        }
        for what, (present, fix) in unsupported.items():
            if present:
                return f"its attention has {what}, which vitpos's attention has not", fix
    return None


def encoding_for(model: VisionTransformer, name: str, options: dict) -> PositionalEncoding:
    """The encoding ``name`` built on ``model``'s geometry: its width, heads, depth, training grid
    (``patch_embed.grid_size``) and prefix tokens; a :class:`UserError` for a name or option that
    does not fit."""
    try:
        get_encoding_class(name)
    except KeyError:
        raise UserError("name", f"unknown encoding {name!r}", f"valid: {', '.join(registered(2))}") from None
    ctx = EncodingContext(
        dim=model.embed_dim,
        num_heads=model.blocks[0].attn.num_heads,
        depth=len(model.blocks),
        grid=tuple(model.patch_embed.grid_size),
        num_prefix_tokens=model.num_prefix_tokens,
    )
    try:
        return create_encoding(name, ctx, **options)
    except (TypeError, ValueError) as err:  # an OptionError names its option (encoding.base)
        option = getattr(err, "option", f"encoding {name}")
        raise UserError(option, str(err).rstrip("."), f"configs/encoding/{name}.yaml lists its options") from None


def apply_encoding(model: nn.Module, name: str, **options) -> EncodedVisionTransformer:
    """Convert the timm ``VisionTransformer`` ``model`` in place to the vitpos encoding ``name``
    (with its ``options``, as ``configs/encoding/<name>.yaml`` lists them) and return it.

    The module docstring says what is kept and what becomes of ``pos_embed``. Raises
    :class:`UserError` (the model untouched) for a model that is not a plain timm ViT, an unknown
    encoding or an option it refuses."""
    problem = conversion_problem(model)
    if problem is not None:
        what, kwarg = problem
        fix = f"build it with {kwarg}" if kwarg else "e.g. timm.create_model('vit_tiny_patch16_224')"
        raise UserError("model", what, fix)
    param = next(model.parameters())
    pe = encoding_for(model, name, options).to(param.device, param.dtype)
    table, table_grid = take_pos_embed(model)
    if table is not None and isinstance(pe, TABLES):
        carry_table(pe, table, table_grid, options)
    for blk in model.blocks:
        blk.attn = vitpos_attention(blk.attn)
    embed = model.patch_embed  # any size (the encoding decides what a new grid means), tokens as (B, h, w, D)
    embed.strict_img_size, embed.flatten, embed.output_fmt = False, False, Format.NHWC
    model.__class__ = EncodedVisionTransformer
    model.pos = pe
    model.dynamic_img_size, model.no_embed_class = True, True
    return model


def vitpos_attention(attn: TimmAttention) -> Attention:
    """vitpos's SDPA attention holding timm's ``qkv`` and ``proj`` layers (the same weights and
    state-dict names) and its dropout rates."""
    with torch.device("meta"):  # its own layers are replaced at once: no memory for them
        new = Attention(attn.attn_dim, attn.num_heads, qkv_bias=attn.qkv.bias is not None)
    new.qkv, new.proj, new.proj_drop = attn.qkv, attn.proj, attn.proj_drop
    new.attn_drop = attn.attn_drop.p
    return new.train(attn.training)


def table_grid(model: VisionTransformer, rows: int) -> Grid:
    """The grid of ``rows`` patch rows of a position table: the model's grid when the count fits
    it, else the square grid of a checkpoint made at another size."""
    grid = tuple(model.patch_embed.grid_size)
    if rows == math.prod(grid):
        return grid
    side = math.isqrt(rows)
    if side * side != rows:
        raise UserError(
            "pos_embed", f"{rows} patch rows fit neither the grid {grid} nor a square grid", "a square table"
        )
    return side, side


def take_pos_embed(model: VisionTransformer) -> tuple[torch.Tensor | None, Grid | None]:
    """Remove ``model.pos_embed``; return its patch rows (N, D) and their grid (None, None
    without a table). Rows of the class and register tokens (``no_embed_class=False``) are
    added to those tokens: the sum timm computed in every forward, computed once."""
    pos = model.pos_embed
    if pos is None:
        return None, None
    rows = pos.detach()[0]  # (P + N, D), or (N, D) with no_embed_class
    prefix = 0 if model.no_embed_class else model.num_prefix_tokens
    grid = table_grid(model, len(rows) - prefix)  # refused here, before the model changes
    model.pos_embed = None
    with torch.no_grad():
        if prefix and model.cls_token is not None:
            model.cls_token.add_(rows[:1])  # (1, 1, D) += (1, D)
        if prefix and model.reg_token is not None:
            model.reg_token.add_(rows[1 if model.cls_token is not None else 0 : prefix])  # (1, R, D) += (R, D)
    return rows[prefix:], grid


def carry_table(pe: PositionalEncoding, table: torch.Tensor, grid: Grid, options: dict) -> None:
    """Set the learned table of ``pe`` from ``table`` (N, D) on ``grid``. Another grid than
    ``pe``'s is resampled by the encoding's own rule: the table is set on a copy of the encoding
    built for ``grid``, which is asked for ``pe``'s grid (in training mode, where every learned
    table resamples whatever its strategy)."""
    if tuple(grid) != pe.train_grid:
        source = create_encoding(pe.name, replace(pe.ctx, grid=tuple(grid)), **options)
        set_table(source.to(table.device, table.dtype), table)
        with torch.no_grad():
            table = source.train().table_for(pe.train_grid)  # (N', D) on pe's grid
    set_table(pe, table)


def set_table(pe: PositionalEncoding, table: torch.Tensor) -> None:
    """Copy a full table (h*w, D) on ``pe``'s grid into ``pe``: ``learned_1d`` as it is; the
    factorized tables as their least-squares fit (exact for a table of their own form)."""
    with torch.no_grad():
        if isinstance(pe, Learned1D):
            pe.table.copy_(table)
            return
        h, w = pe.train_grid
        t = table.reshape(h, w, -1)  # (h, w, D)
        if isinstance(pe, Learned2D):  # rows in the first half of the channels, columns in the second
            half = pe.rows.shape[1]
            pe.rows.copy_(t[..., :half].mean(1))  # (h, D/2)
            pe.cols.copy_(t[..., half:].mean(0))  # (w, D/2)
        else:  # learned_2d_sum: rows[y] + cols[x], the two main effects with the grand mean split
            mean = t.mean((0, 1)) / 2  # (D,)
            pe.rows.copy_(t.mean(1) - mean)  # (h, D)
            pe.cols.copy_(t.mean(0) - mean)  # (w, D)


def carries_table(name: str) -> bool:
    """Whether the encoding ``name`` takes timm's ``pos_embed`` over (False for unknown names)."""
    try:
        return issubclass(get_encoding_class(name), TABLES)
    except KeyError:
        return False
