"""snippets/figures/_flow.py, which draws the flow diagrams of docs/bert/ and
docs/gpt2/encoder-to-decoder.md: the shapes it records with forward hooks are those of
MiniLM's real run under transformers, and its hooks are gone afterwards."""

import pytest

from snippets.figures._flow import record_calls
from tests.inputs import PAIRS

pytestmark = pytest.mark.usefixtures("no_grad")


def test_the_diagrams_shapes_come_from_the_model(minilm, tokenizer):
    """The flow diagrams are drawn from forward hooks: they see the real shapes, and the
    hooks are gone afterwards."""
    batch = tokenizer(*PAIRS, padding=True, return_tensors="pt")
    hooks_before = [len(module._forward_hooks) for module in minilm.modules()]
    calls = record_calls(minilm, batch)
    B, T = batch["input_ids"].shape
    C, H = minilm.config.hidden_size, minilm.config.num_attention_heads
    assert calls["embeddings"].outputs == ((B, T, C),)
    assert calls["embeddings.position_embeddings"].outputs == ((1, T, C),)
    for i in range(minilm.config.num_hidden_layers):
        assert calls[f"encoder.layer.{i}"].outputs == ((B, T, C),)
        assert calls[f"encoder.layer.{i}.attention.self"].outputs == ((B, T, C), (B, H, T, T))
        assert calls[f"encoder.layer.{i}.intermediate"].outputs == (
            (B, T, minilm.config.intermediate_size),
        )
    assert calls["pooler"].outputs == ((B, C),)
    # the library keeps hooks of its own (for output_hidden_states); ours are all removed
    assert [len(module._forward_hooks) for module in minilm.modules()] == hooks_before
