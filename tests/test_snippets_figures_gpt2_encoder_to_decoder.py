"""snippets/figures/gpt2_encoder_to_decoder.py, which draws docs/gpt2/encoder-to-decoder.md's
diagrams: the shapes it records are those of the live layers, Part II's DecoderLayer and
the book GPT-2's first block, and the labels name every size once."""

import pytest

from snippets.figures.gpt2_encoder_to_decoder import (
    B,
    S,
    T,
    recorded_decoder_layer,
    recorded_gpt2,
)

pytestmark = pytest.mark.usefixtures("no_grad")


def test_the_decoder_layer_diagram_shows_the_shapes_of_the_live_layer():
    calls, sizes, label = recorded_decoder_layer()
    C, H = sizes["C"], sizes["H"]
    assert calls["self_attn"].outputs == ((B, T, C), (B, H, T, T))
    assert calls["cross_attn"].inputs == ((B, T, C), (B, S, C), (B, S, C))
    assert calls["cross_attn"].outputs == ((B, T, C), (B, H, T, S))
    assert calls["feed_forward.linear1"].outputs == ((B, T, 4 * C),)
    assert calls["norm3"].outputs == ((B, T, C),)
    assert label((B, H, T, S)) == f"(B, H, T, S)\n{(B, H, T, S)}"


def test_the_gpt2_block_diagram_shows_the_shapes_of_the_book_model(gpt2_shakespeare):
    calls, sizes, label = recorded_gpt2()
    C = gpt2_shakespeare.config.n_embd
    assert sizes["C"] == C and sizes["H"] == gpt2_shakespeare.config.n_head
    root = "transformer.h.0."
    assert calls[root + "ln_1"].outputs == ((B, T, C),)
    assert calls[root + "attn.c_attn"].outputs == ((B, T, 3 * C),)
    assert calls[root + "mlp.c_fc"].outputs == ((B, T, 4 * C),)
    assert calls[root.rstrip(".")].outputs[0] == (B, T, C)
    assert "crossattention" not in {name.removeprefix(root) for name in calls}
    assert label((B, T, 3 * C)) == f"(B, T, 3C)\n{(B, T, 3 * C)}"
