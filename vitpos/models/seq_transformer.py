"""A small Transformer that labels every token of a sequence, with its position
information coming only from a pluggable :class:`~vitpos.encodings.PositionalEncoding`."""

from __future__ import annotations

import torch
from torch import nn

from vitpos.encodings import EncodingContext, create_encoding, option_group

from .attention import EncoderStack, check_heads
from .vit import _init_weights


class SequenceTransformer(nn.Module):
    """Token embedding -> [encoding] -> pre-norm blocks -> norm -> per-token head.

    ``encoding``: a registry name or ``{name: ..., **options}``. ``max_len`` is
    the training length: the encoding's training grid ``(max_len,)``; other
    lengths are the encoding's business (its ``strategy``). ``causal`` adds a
    causal mask. ``zero_token_embeddings`` multiplies the token embeddings by
    zero, so the blocks see only what the encoding adds to the tokens (for the
    position probe; note rotary and bias encodings add nothing there).

    ``embed_std`` (token embedding init) sits between the learned table's
    0.02 and the sinusoids' amplitude 1: with GPT-2's 0.02, ``sincos_1d``
    drowns the tokens and learns ``copy_offset`` far more slowly; with 1,
    ``learned_1d`` does.

    Padding: ``padding_mask`` (B, N), True at padding, masks those keys, so a
    sequence gets the same outputs whatever padding its batch adds. Encodings
    whose positions depend on the padded length N (``interpolate``, ``ntk``,
    ``dynamic``, ``yarn`` beyond ``max_len``) break that; evaluate them on
    batches of one length (``test_dataloader_at``).
    """

    @option_group("model")  # its options' errors read model.<option>; the encoding's keep encoding.<option>
    def __init__(
        self,
        encoding: dict | str = "rope_1d",
        vocab_size: int = 17,
        num_classes: int = 16,
        dim: int = 128,
        depth: int = 2,
        num_heads: int = 4,
        mlp_ratio: float = 4.0,
        causal: bool = False,
        max_len: int = 64,
        zero_token_embeddings: bool = False,
        embed_std: float = 0.1,
        dropout: float = 0.0,
        drop_path: float = 0.0,
    ):
        super().__init__()
        self.causal, self.max_len = causal, max_len
        self.zero_token_embeddings = zero_token_embeddings
        self.embed = nn.Embedding(vocab_size, dim)
        check_heads(dim, num_heads)  # before the encoding, whose head-width rules assume it
        enc = {"name": encoding} if isinstance(encoding, str) else dict(encoding)
        ctx = EncodingContext(dim=dim, num_heads=num_heads, depth=depth, grid=(max_len,))
        self.pos = create_encoding(enc.pop("name"), ctx, **enc)
        self.drop = nn.Dropout(dropout)
        self.encoder = EncoderStack(dim, depth, num_heads, mlp_ratio, drop_path, dropout)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)
        self.apply(_init_weights)
        nn.init.normal_(self.embed.weight, std=embed_std)

    def tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        """Embedded tokens with the absolute encoding added: (B, N, D)."""
        x = self.embed(tokens)  # (B, N, D)
        if self.zero_token_embeddings:
            x = x * 0.0
        return self.drop(self.pos.add_to_tokens(x, (tokens.shape[1],)))

    def forward(self, tokens: torch.Tensor, padding_mask: torch.Tensor | None = None, return_attention: bool = False):
        """tokens (B, N) long, padding_mask (B, N) bool -> logits (B, N, classes)."""
        if padding_mask is not None and not torch.compiler.is_compiling() and not padding_mask.any():
            padding_mask = None  # one length: skip building a (B, H, N, N) mask (eager only: data-dependent)
        grid = (tokens.shape[1],)
        out = self.encoder(self.tokens(tokens), grid, self.pos, padding_mask, self.causal, return_attention)
        x, maps = out if return_attention else (out, None)
        logits = self.head(self.norm(x))  # (B, N, classes)
        return (logits, maps) if return_attention else logits

    @torch.no_grad()
    def attention_maps(self, tokens: torch.Tensor, padding_mask: torch.Tensor | None = None) -> list[torch.Tensor]:
        """Softmax attention (B, H, N, N) of every block."""
        return self.forward(tokens, padding_mask, return_attention=True)[1]

    def no_weight_decay(self) -> set[str]:
        """Position parameters (norms, biases: excluded by the optimizer by ndim)."""
        return {f"pos.{n}" for n in self.pos.no_weight_decay()}
