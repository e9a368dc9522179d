"""docs/transformer/attention.md's warning box, pinned on snippets/transformer.py's
masks: one convention (True = may attend) for the padding and the causal mask, combined
with a logical and, checked entry by entry against the definition, and against a
well-known tutorial's mixed conventions, which let a query read the future. Attention
itself is checked against torch's scaled_dot_product_attention in
tests/test_snippets_transformer.py."""

import torch

from snippets.transformer import causal_mask, padding_mask

PAD = 0


def test_warning_one_convention_per_codebase():
    """docs/transformer/attention.md, warning "One convention per codebase: a padding mask
    with 1 = pad and a causal mask with True = allowed cannot be combined": one convention
    (True = may attend), combined with a logical and."""
    tokens = torch.tensor([[5, 7, 3, 0, 0], [0, 0, 4, 8, 9]])  # right- and left-padded
    padding, causal = padding_mask(tokens, PAD), causal_mask(5)
    assert padding.dtype == causal.dtype == torch.bool
    assert padding.shape == (2, 1, 1, 5) and causal.shape == (5, 5)
    combined = padding & causal
    for b in range(2):
        for t in range(5):
            for s in range(5):
                assert bool(combined[b, 0, t, s]) == (tokens[b, s] != PAD and s <= t)
    # the tutorial's combination (1 = pad, maximum with True = allowed) lets query 0 read the future
    mixed = torch.maximum((tokens == PAD).float()[:, None, None, :], causal.float())
    assert not torch.equal(mixed[0, 0] == 0, combined[0, 0])
    assert (mixed[0, 0, 0] == 0).tolist() == [False, True, True, False, False]
