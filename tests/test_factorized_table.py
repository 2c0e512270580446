"""learned_2d_sum (NaViT's factorized table): timm's NaFlexEmbeds numerically, the sum structure,
full-width tables against learned_2d's halves, resizing and the class token."""

import pytest
import torch
from conftest import make_encoding, small_vit
from timm.models.naflexvit import NaFlexEmbeds


def timm_factorized(rows: torch.Tensor, cols: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """timm's factorized position table for ``grid`` (its own code path), as (h*w, D)."""
    h, w = rows.shape[0], cols.shape[0]
    embeds = NaFlexEmbeds(patch_size=4, embed_dim=rows.shape[1], class_token=False, pos_embed="factorized",
                          pos_embed_grid_size=(h, w))  # fmt: skip
    with torch.no_grad():
        embeds.pos_embed_y.copy_(rows[None])
        embeds.pos_embed_x.copy_(cols[None])
        x = torch.zeros(1, grid[0] * grid[1], rows.shape[1])
        embeds._apply_factorized_pos_embed(x, grid_size=list(grid))  # adds in place
    return x[0]


@pytest.mark.parametrize("train_grid", [(4, 4), (3, 5)])
@pytest.mark.parametrize("grid", [None, (6, 6), (2, 7), (5, 3)])
def test_equals_timm_factorized_table_on_the_training_grid_and_resized(train_grid, grid):
    pe = make_encoding("learned_2d_sum", grid=train_grid, dim=16)
    grid = grid or train_grid
    with torch.no_grad():
        ours = pe.table_for(grid)
    torch.testing.assert_close(ours, timm_factorized(pe.rows, pe.cols, grid), atol=1e-6, rtol=1e-6)


def test_every_token_is_its_row_vector_plus_its_column_vector():
    pe = make_encoding("learned_2d_sum", grid=(3, 5), dim=8)
    table = pe.table_for((3, 5)).reshape(3, 5, 8)
    for y in range(3):
        for x in range(5):
            torch.testing.assert_close(table[y, x], pe.rows[y] + pe.cols[x])
    # a sum of two tables: differences along a row do not depend on the row
    torch.testing.assert_close(table[0, 3] - table[0, 1], table[2, 3] - table[2, 1])


def test_full_width_tables_h_plus_w_vectors_of_width_d():
    pe = make_encoding("learned_2d_sum", grid=(3, 5), dim=8)
    assert pe.rows.shape == (3, 8) and pe.cols.shape == (5, 8)
    half = make_encoding("learned_2d", grid=(3, 5), dim=8)
    assert sum(p.numel() for p in pe.parameters()) == 2 * sum(p.numel() for p in half.parameters())


def test_bicubic_resample_and_error_strategy():
    pe = make_encoding("learned_2d_sum", grid=(4, 4), dim=8, resample="bicubic")
    assert pe.table_for((6, 6)).shape == (36, 8)
    linear = make_encoding("learned_2d_sum", grid=(4, 4), dim=8)  # the same tables (same seed), resized linearly
    assert not torch.allclose(pe.table_for((6, 6)), linear.table_for((6, 6)))
    strict = make_encoding("learned_2d_sum", grid=(4, 4), dim=8, strategy="error").eval()
    with pytest.raises(ValueError, match="encoding.strategy=interpolate"):
        strict.table_for((6, 6))


def test_class_token_gets_no_position_and_the_grid_tokens_do():
    model = small_vit("learned_2d_sum", pool="cls")
    x = torch.randn(2, 16, 32)
    out = model.pos.add_to_tokens(x, (4, 4))
    torch.testing.assert_close(out - x, model.pos.table_for((4, 4)).expand(2, -1, -1))
    with torch.no_grad():
        model(torch.randn(2, 3, 16, 16))  # the class token is concatenated after the table is added
