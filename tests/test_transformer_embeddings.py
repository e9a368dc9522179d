"""docs/transformer/embeddings.md's positional encoding (snippets/transformer.py's
`sinusoidal_positional_encoding`) against the paper's formula computed in float64, at
sizes the page does not show, with its warning box (the exponent is 2i/d_model, 2i the
even column), and the page's two claims: a fixed offset is a rotation, and the
similarity of two positions depends only on their distance."""

import math

import pytest
import torch

from snippets.transformer import sinusoidal_positional_encoding


def paper_formula(pos, column, d_model):
    angle = pos / 10000 ** (2 * (column // 2) / d_model)
    return math.sin(angle) if column % 2 == 0 else math.cos(angle)


@pytest.mark.parametrize(("seq_len", "d_model"), [(1, 2), (64, 512), (2048, 64)])
def test_warning_the_exponent_is_2i_over_d_model(prove, seq_len, d_model):
    """docs/transformer/embeddings.md, warning "The exponent is \\(2i/d_{model}\\), where
    \\(2i\\) is the even column, not \\(2 \\cdot 2i\\)": the encoding is the paper's formula,
    and the doubled exponent is not."""
    pe = sinusoidal_positional_encoding(seq_len, d_model)
    assert pe.shape == (seq_len, d_model) and pe.dtype == torch.float32
    expected = torch.tensor(
        [[paper_formula(p, c, d_model) for c in range(d_model)] for p in range(seq_len)]
    )
    prove(
        "sinusoidal positional encoding by hand",
        "the paper's formula, computed in float64",
        f"{seq_len} position{'s' * (seq_len > 1)}, d_model = {d_model}",
        pe,
        expected,
        1e-6,  # float64 angles: even at pos 2047
    )
    doubled = torch.tensor(
        [[math.sin(p / 10000 ** (2 * c / d_model)) for c in range(0, d_model, 2)] for p in range(2)]
    )
    if d_model > 2:
        assert not torch.allclose(pe[:2, 0::2], doubled, atol=1e-3)


def test_positional_encoding_offset_is_a_rotation_and_similarity_depends_on_distance():
    pe = sinusoidal_positional_encoding(300, 128)
    omega = 10000 ** (-torch.arange(0, 128, 2, dtype=torch.float64) / 128)
    for k in (1, 17, 250):
        cos, sin = torch.cos(k * omega).float(), torch.sin(k * omega).float()
        s, c = pe[:-k, 0::2], pe[:-k, 1::2]
        assert torch.allclose(s * cos + c * sin, pe[k:, 0::2], atol=1e-5)
        assert torch.allclose(c * cos - s * sin, pe[k:, 1::2], atol=1e-5)
    similarity = pe @ pe.T
    for distance in (0, 5, 100):
        diagonal = torch.diagonal(similarity, offset=distance)
        assert torch.allclose(diagonal, diagonal[0].expand_as(diagonal), atol=1e-3)
