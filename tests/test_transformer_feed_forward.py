"""docs/transformer/feed-forward.md's warning box, pinned on snippets/transformer.py's
LayerNorm against torch's F.layer_norm: the unbiased standard deviation with ε outside
the square root is not a LayerNorm, off by exactly √((C - 1) / C), and far off on nearly
constant vectors. LayerNorm and the feed-forward network are checked against torch.nn
in tests/test_snippets_transformer.py."""

import math

import torch
import torch.nn.functional as F

from snippets.transformer import LayerNorm

D_MODEL = 512


def test_warning_unbiased_std_and_eps_outside_the_root_are_not_a_layer_norm(prove):
    """docs/transformer/feed-forward.md, warning "Unbiased standard deviation, and ε outside
    the square root: not a LayerNorm": x.std() divides by C - 1, and eps belongs inside the
    square root."""
    torch.manual_seed(0)
    ours = LayerNorm(D_MODEL)
    x = torch.randn(100, D_MODEL)
    mistaken = (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-5)
    out = ours(x)
    prove(
        "LayerNorm by hand",
        "`F.layer_norm`",
        "100 random vectors of 512",
        out,
        F.layer_norm(x, (D_MODEL,)),
        1e-5,
    )
    assert not torch.allclose(out, mistaken, atol=1e-4)
    factor = math.sqrt((D_MODEL - 1) / D_MODEL)
    assert torch.allclose(mistaken, out * factor, atol=1e-4)  # off by exactly √((C - 1) / C)
    assert out.var(-1, correction=0).sub(1).abs().max() < 1e-4
    # nearly constant vectors: eps inside the root decides the scale, as nn.LayerNorm's
    flat = 1 + 1e-3 * torch.randn(10, D_MODEL)
    prove(
        "LayerNorm by hand",
        "`F.layer_norm`",
        "10 nearly constant vectors of 512 (1 plus noise of 1e-3)",
        ours(flat),
        F.layer_norm(flat, (D_MODEL,)),
        # float32 keeps 1 + 1e-3 noise to 6e-8, that is 6e-5 of the noise, which the
        # normalisation scales up to 1: measured 3.6e-5
        5e-4,
    )
    mistaken_flat = (flat - flat.mean(-1, keepdim=True)) / (flat.std(-1, keepdim=True) + 1e-5)
    assert mistaken_flat.std() / ours(flat).std() > 3
