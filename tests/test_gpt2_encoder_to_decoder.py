"""docs/gpt2/encoder-to-decoder.md's claims, on inputs the page does not show: an encoder
(MiniLM) lets a later token change every output, a decoder (the book's GPT-2) none before
it; Part II's DecoderLayer with its cross-attention silenced is GPT-2's block, whatever the
memory; and the warning box on calling a block alone. The layer's parity with GPT2Block
is in tests/test_snippets_encoder_to_decoder.py."""

import pytest
import torch
from transformers import GPT2LMHeadModel

from snippets.encoder_to_decoder import copy_gpt2_block
from snippets.hub import GPT2_SHAKESPEARE
from snippets.transformer import DecoderLayer, causal_mask
from tests.inputs import random_ids

pytestmark = pytest.mark.usefixtures("no_grad")


def same(ours, theirs):
    """As on the page: no difference above 1e-5 of the largest value."""
    return torch.allclose(ours, theirs, rtol=0, atol=1e-5 * theirs.abs().max().item())


def test_an_encoder_reads_later_tokens_and_a_decoder_does_not(minilm, gpt2_shakespeare):
    """Change the tokens from position 8 on: every MiniLM output moves, no GPT-2 output
    before position 8 does."""
    for model in (minilm, gpt2_shakespeare):
        ids = random_ids(model, 2, 20, seed=3)
        changed = ids.clone()
        changed[:, 8:] = random_ids(model, 2, 12, seed=4)
        before = model(ids, output_hidden_states=True).hidden_states[-1]
        after = model(changed, output_hidden_states=True).hidden_states[-1]
        moved = (before - after).abs().amax(dim=-1)  # (B, T)
        if model is minilm:
            assert (moved > 1e-3).all()
        else:
            assert torch.equal(before[:, :8], after[:, :8])
            assert (moved[:, 8:] > 1e-3).all()


def test_the_decoder_layer_with_silenced_cross_attention_is_the_gpt2_block(prove, gpt2_shakespeare):
    C, H = gpt2_shakespeare.config.n_embd, gpt2_shakespeare.config.n_head
    gpt = gpt2_shakespeare.transformer
    ids = random_ids(gpt2_shakespeare, 3, 50, seed=5)
    # the model's hidden states: the inputs of its blocks, each block's output but the last's
    hidden = gpt2_shakespeare(ids, output_hidden_states=True).hidden_states
    outputs, references = [], []
    for i, block in enumerate(gpt.h[:-1]):
        ours = copy_gpt2_block(block).eval()
        torch.manual_seed(i)
        decoder = DecoderLayer(
            C, H, 4 * C, norm_first=True, activation=ours.feed_forward.activation
        )
        decoder.eval()
        decoder.self_attn, decoder.feed_forward = ours.self_attn, ours.feed_forward
        decoder.norm1, decoder.norm3 = ours.norm1, ours.norm2
        torch.nn.init.zeros_(decoder.cross_attn.out_proj.weight)
        torch.nn.init.zeros_(decoder.cross_attn.out_proj.bias)
        for S in (1, 7, 64):
            memory = torch.randn(3, S, C) * 10  # (B, S, C): whatever it holds
            y = decoder(hidden[i], memory, self_mask=causal_mask(50))
            assert same(y, hidden[i + 1])
            outputs.append(y)
            references.append(hidden[i + 1])
    prove(
        "Part II's decoder layer, cross-attention silenced, with GPT-2's weights",
        "`GPT2Block`",
        "random ids, 3×50, book's GPT-2, its first 3 blocks, memories of 1, 7 and 64 vectors",
        torch.stack(outputs),
        torch.stack(references),
        1e-3,  # float32, the residual stream up to 244: measured 8.4e-5
    )


def test_warning_a_gpt2_block_called_on_its_own_is_causal_only_under_sdpa(prove, gpt2_shakespeare):
    """Under SDPA (the default) a block called with no mask is causal; under eager it
    attends to every token, raising nothing; with the model's mask passed, eager is causal."""
    ids = random_ids(gpt2_shakespeare, 2, 12, seed=6)
    eager = GPT2LMHeadModel.from_pretrained(GPT2_SHAKESPEARE.repo_id, attn_implementation="eager")
    sdpa = GPT2LMHeadModel.from_pretrained(GPT2_SHAKESPEARE.repo_id, attn_implementation="sdpa")
    hidden = sdpa(ids, output_hidden_states=True).hidden_states
    x, expected = hidden[0], hidden[1]  # block 0's input, and its output in the model
    inputs = "random ids, 2×12, book's GPT-2, block 0"
    prove(
        "`GPT2Block` called alone, SDPA attention, no mask",
        "`GPT2LMHeadModel` (its block 0's output)",
        inputs,
        sdpa.transformer.h[0](x),
        expected,
        1e-4,
    )
    alone = eager.transformer.h[0](x)
    assert not torch.allclose(alone, expected, atol=1.0)
    # the last position reads every token either way; the others read the future under eager
    prove(
        "`GPT2Block` called alone, eager attention, no mask: last position",
        "`GPT2LMHeadModel` (its block 0's output)",
        inputs,
        alone[:, -1],
        expected[:, -1],
        # float32, the residual stream up to 118: measured 1.9e-5 under the named
        # configurations, 2.29e-5 as-is on a Zen 4 with AVX-512
        5e-4,
    )
    mask = torch.zeros(12, 12).masked_fill(~causal_mask(12), torch.finfo(torch.float32).min)
    masked = eager.transformer.h[0](x, attention_mask=mask[None, None])  # (B, 1, T, T), additive
    prove(
        "`GPT2Block` called alone, eager attention, causal mask passed",
        "`GPT2LMHeadModel` (its block 0's output)",
        inputs,
        masked,
        expected,
        5e-4,  # float32, the residual stream up to 118: measured 2.3e-5
    )
