import pytest
import torch
from conftest import make_encoding

from vitpos.models.attention import Attention, build_attention_mask


@pytest.mark.parametrize("name", ["none", "rope_2d", "rel_bias_2d", "combo"])
def test_sdpa_equals_manual_softmax_attention(name):
    torch.manual_seed(0)
    attn = Attention(32, 2).eval()
    pe = make_encoding(name, grid=(4, 4))
    x = torch.randn(3, 16, 32)
    mask = build_attention_mask(pe.attention_bias((4, 4), 0, x.device, x.dtype), None, False, 16, x.device, x.dtype)
    fast = attn(x, (4, 4), pe, 0, mask)
    probs = attn.attention_probs(x, (4, 4), pe, 0, mask)  # (B, H, N, N)
    v = attn.qkv(x).reshape(3, 16, 3, 2, 16)[:, :, 2].transpose(1, 2)  # (B, H, N, Dh)
    manual = attn.proj((probs @ v).transpose(1, 2).reshape(3, 16, 32))
    torch.testing.assert_close(fast, manual, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(probs.sum(-1), torch.ones(3, 2, 16))


def test_masks_combine_bias_causal_and_padding():
    bias = torch.randn(2, 4, 4)
    padding = torch.tensor([[False, False, False, True]])
    mask = build_attention_mask(bias, padding, True, 4, torch.device("cpu"), torch.float32)  # (1, 2, 4, 4)
    neg = torch.finfo(torch.float32).min
    assert mask.shape == (1, 2, 4, 4)
    assert (mask[0, :, 0, 1:] == neg).all()  # future
    assert (mask[0, :, :, 3] == neg).all()  # padding key
    torch.testing.assert_close(mask[0, :, 2, :3], bias[:, 2, :3])
