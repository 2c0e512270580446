"""RoPE on q and k: vitpos' cached complex multiply vs rotary-embedding-torch.

    python bench/bench_rope.py [--batch 64 --heads 4 --tokens 256 --head-dim 64]

Peer: rotary-embedding-torch (lucidrains), ``RotaryEmbedding.rotate_queries_or_keys``,
the rotate-half form on interleaved pairs, both on the same q, k. vitpos rotates
by a complex multiply with a table cached per grid; the ``half`` layout pays
for a transpose on top. Also the textbook rotate-half in
vitpos.encodings.functional, and vitpos' axial 2D RoPE vs the peer's axial
``get_axial_freqs`` + ``apply_rotary_emb``. Ratios > 1 mean vitpos is faster.
"""

import argparse

import torch
from common import median_time, report
from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb

from vitpos.encodings import EncodingContext, create_encoding
from vitpos.encodings import functional as fn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--head-dim", type=int, default=64)
    a = p.parse_args()
    q = torch.randn(a.batch, a.heads, a.tokens, a.head_dim)
    k = torch.randn_like(q)
    ctx = EncodingContext(a.heads * a.head_dim, a.heads, 1, (a.tokens,))

    ours_1d = create_encoding("rope_1d", ctx, layout="half")
    ours_1d_pairs = create_encoding("rope_1d", ctx, layout="interleaved")
    peer_1d = RotaryEmbedding(dim=a.head_dim, cache_if_possible=True)
    angles = torch.outer(torch.arange(a.tokens, dtype=torch.float32), fn.rope_inv_freq(a.head_dim // 2, 10000.0))
    cos, sin = angles.cos(), angles.sin()
    print(f"1D RoPE on q and k: B={a.batch} H={a.heads} N={a.tokens} Dh={a.head_dim}")
    report(
        [
            (
                "rotary-embedding-torch",
                median_time(lambda: (peer_1d.rotate_queries_or_keys(q), peer_1d.rotate_queries_or_keys(k))),
            ),
            ("vitpos rope_1d interleaved", median_time(lambda: ours_1d_pairs.rotate_qk(q, k, (a.tokens,), 0))),
            ("vitpos rope_1d half", median_time(lambda: ours_1d.rotate_qk(q, k, (a.tokens,), 0))),
            (
                "vitpos rotate-half reference",
                median_time(lambda: (fn.rotate_half_reference(q, cos, sin), fn.rotate_half_reference(k, cos, sin))),
            ),
        ],
        peer="rotary-embedding-torch",
    )

    side = int(a.tokens**0.5)
    grid = (side, side)
    ours_2d = create_encoding("rope_2d", EncodingContext(a.heads * a.head_dim, a.heads, 1, grid))
    peer_2d = RotaryEmbedding(dim=a.head_dim // 4, freqs_for="pixel", max_freq=side)
    q2, k2 = q[:, :, : side * side], k[:, :, : side * side]

    def peer_axial():
        freqs = peer_2d.get_axial_freqs(side, side).reshape(side * side, -1)  # recomputed per call, as its docs use it
        return apply_rotary_emb(freqs, q2), apply_rotary_emb(freqs, k2)

    cached = peer_2d.get_axial_freqs(side, side).reshape(side * side, -1)

    print(f"\naxial 2D RoPE on a {side}x{side} grid")
    report(
        [
            ("rotary-embedding-torch axial", median_time(peer_axial)),
            (
                "rotary-embedding-torch axial, freqs precomputed",
                median_time(lambda: (apply_rotary_emb(cached, q2), apply_rotary_emb(cached, k2))),
            ),
            ("vitpos rope_2d (cached complex)", median_time(lambda: ours_2d.rotate_qk(q2, k2, grid, 0))),
        ],
        peer="rotary-embedding-torch axial",
    )


if __name__ == "__main__":
    main()
