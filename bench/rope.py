"""RoPE on q and k, forward + backward: vitpos vs rotary-embedding-torch, timm and a compiled rotate-half.

Two shapes: a ViT (8x8 grid, axial 2D RoPE; B=128, H=3, Dh=64) and a long
sequence (1D RoPE; B=2, H=8, N=4096, Dh=64). Each contender rotates the same
q and k (which require grad) and back-propagates a fixed random cotangent.
Peers: rotary-embedding-torch (``rotate_queries_or_keys`` / axial
``apply_rotary_emb`` with precomputed freqs), timm's ``RotaryEmbeddingCat`` +
``apply_rot_embed_cat`` (EVA's helpers, table precomputed), and the textbook
rotate-half (``bench/references.rotate_half_reference``, also the suite's reference) under ``torch.compile``;
vitpos's half layout also runs compiled (inductor fuses its real-arithmetic form).
Ratios are against the fastest peer (> 1: vitpos is faster).
"""

from __future__ import annotations

import torch
from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb
from timm.layers.pos_embed_sincos import RotaryEmbeddingCat, apply_rot_embed_cat

from vitpos.encodings import EncodingContext, create_encoding
from vitpos.encodings import functional as fn

from .references import rotate_half_reference
from .timing import header, interleaved_medians, table


def fwd_bwd(rotate, q, k):
    gq, gk = torch.randn_like(q), torch.randn_like(k)

    def call():
        q.grad = k.grad = None
        qr, kr = rotate(q, k)
        torch.autograd.backward((qr, kr), (gq, gk))

    return call


def contenders_1d(b, h, n, dh):
    ctx = EncodingContext(h * dh, h, 1, (n,))
    ours = create_encoding("rope_1d", ctx, layout="half")
    ours_pairs = create_encoding("rope_1d", ctx)
    ours_compiled = torch.compile(lambda q, k: ours.rotate_qk(q, k, (n,), 0), fullgraph=True, dynamic=False)
    lucid = RotaryEmbedding(dim=dh, cache_if_possible=True)
    angles = torch.outer(torch.arange(n, dtype=torch.float32), fn.rope_inv_freq(dh // 2, 10000.0))  # (N, Dh/2)
    cos, sin = angles.cos(), angles.sin()
    half = torch.compile(rotate_half_reference, fullgraph=True, dynamic=False)
    return {
        "rotary-embedding-torch": lambda q, k: (lucid.rotate_queries_or_keys(q), lucid.rotate_queries_or_keys(k)),
        "compiled rotate-half": lambda q, k: (half(q, cos, sin), half(k, cos, sin)),
        "vitpos rope_1d half": lambda q, k: ours.rotate_qk(q, k, (n,), 0),
        "vitpos rope_1d half, compiled": lambda q, k: ours_compiled(q, k),
        "vitpos rope_1d interleaved": lambda q, k: ours_pairs.rotate_qk(q, k, (n,), 0),
    }


def contenders_2d(b, h, side, dh):
    grid = (side, side)
    ours = create_encoding("rope_2d", EncodingContext(h * dh, h, 1, grid))
    lucid = RotaryEmbedding(dim=dh // 4, freqs_for="pixel", max_freq=side)
    freqs = lucid.get_axial_freqs(side, side).reshape(side * side, -1)  # precomputed, (N, Dh)
    timm_rope = RotaryEmbeddingCat(dim=dh, in_pixels=False, feat_shape=[side, side])
    emb = timm_rope.get_embed()  # (N, 2 Dh): sin | cos, precomputed
    return {
        "rotary-embedding-torch axial": lambda q, k: (apply_rotary_emb(freqs, q), apply_rotary_emb(freqs, k)),
        "timm RotaryEmbeddingCat": lambda q, k: (apply_rot_embed_cat(q, emb), apply_rot_embed_cat(k, emb)),
        "vitpos rope_2d": lambda q, k: ours.rotate_qk(q, k, grid, 0),
    }


def measure(title, rotations, shape, repeats):
    q = torch.randn(*shape, requires_grad=True)
    k = torch.randn(*shape, requires_grad=True)
    times = interleaved_medians({name: fwd_bwd(r, q, k) for name, r in rotations.items()}, repeats)
    peers = {n: t for n, t in times.items() if not n.startswith("vitpos")}
    fastest = min(peers, key=peers.get)
    header(f"{title}: q and k {tuple(shape)}, forward + backward")
    rows = [[n, f"{t * 1e3:.2f}", f"{times[fastest] / t:.2f}x"] for n, t in times.items()]
    table(["RoPE", "ms", f"vs fastest peer ({fastest})"], rows)


def run(quick: bool) -> None:
    repeats = 5 if quick else 15
    measure("2D RoPE, ViT 8x8 grid", contenders_2d(128, 3, 8, 64), (128, 3, 64, 64), repeats)
    n = 1024 if quick else 4096
    measure(f"1D RoPE, long sequence N={n}", contenders_1d(2, 8, n, 64), (2, 8, n, 64), repeats)
