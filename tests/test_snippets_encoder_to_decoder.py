"""snippets/encoder_to_decoder.py, GPT-2's block built from Part II's modules, against
transformers' GPT2Block: block by block and through the whole stack, on the book's
GPT-2 and on a randomly initialised GPT-2 of the real 124M size, on inputs
docs/gpt2/encoder-to-decoder.md does not show (batches, one token, full-length and
512-token sequences).

Tolerance. The two compute the same sums in a different order, so float32 rounds them
differently. The book GPT-2's residual stream reaches 300 to 400, where float32 numbers
are 3.05e-5 apart: its largest block difference measured 8.8e-5 (3 steps) under the three
numeric configurations (tools/numerics.py), so a fixed 1e-5 cannot hold there; the proof
holds it to BLOCK_ATOL = 1e-3, and its logits (3.8e-5) to SHIPPED_LOGITS_ATOL = 5e-4, each
10× what was measured. `same`, as on the page, asks besides for no difference above 1e-5
of the largest value (measured: at most 8.5e-7 of it). At the 124M
size with random weights the values stay below 2, and the fixed atol 1e-5 holds too
(measured: at most 2.4e-7).
"""

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from snippets.encoder_to_decoder import DecoderOnlyLayer, copy_gpt2_block
from snippets.transformer import EncoderLayer, LayerNorm
from tests.inputs import random_ids

pytestmark = pytest.mark.usefixtures("no_grad")

ATOL = 1e-5  # where the values are of size 1: the 124M model with random weights
BLOCK_ATOL = 1e-3  # the shipped model's residual stream, up to 400
LOGITS_ATOL = 1e-4  # float32 logits up to ~3: the 124M model with random weights
SHIPPED_LOGITS_ATOL = 5e-4  # float32 logits up to ~20, as tests/test_snippets_gpt2_by_hand.py


def same(ours, theirs):
    """As on the page: no difference above 1e-5 of the largest value."""
    return torch.allclose(ours, theirs, rtol=0, atol=1e-5 * theirs.abs().max().item())


def block_outputs(model, ids):
    """Each block, with its input and output as the model's own forward pass saw them.

    Recorded with forward hooks, not by calling a block alone: the model hands every block
    its causal mask, and a block called alone with eager attention (as the shared fixture
    loads it) gets none (docs/gpt2/encoder-to-decoder.md, the warning box)."""
    seen = []
    hooks = [
        block.register_forward_hook(lambda b, args, out: seen.append((b, args[0], out)))
        for block in model.transformer.h
    ]
    try:
        model(ids)
    finally:
        for hook in hooks:
            hook.remove()
    assert [b for b, _, _ in seen] == list(model.transformer.h)
    return seen


def stacked_logits(model, ids):
    """The whole model from Part II's modules: embeddings, copied layers, ln_f, tied head."""
    gpt = model.transformer
    x = gpt.wte(ids) + gpt.wpe(torch.arange(ids.size(1)))  # (B, T, C)
    for block in gpt.h:
        x = copy_gpt2_block(block).eval()(x)
    ln_f = LayerNorm(model.config.n_embd, model.config.layer_norm_epsilon)
    ln_f.load_state_dict(gpt.ln_f.state_dict())
    return ln_f(x) @ model.lm_head.weight.T  # (B, T, V)


def copied_blocks_and_the_librarys(model, ids):
    """Each block copied into Part II's modules (with as many parameters) and run on the
    library block's input: the outputs and the library's, stacked, (L, B, T, C) each."""
    outputs, references = [], []
    for block, x, reference in block_outputs(model, ids):
        layer = copy_gpt2_block(block).eval()
        count = sum(p.numel() for p in layer.parameters())
        assert count == sum(p.numel() for p in block.parameters())
        ours = layer(x)
        assert same(ours, reference)
        outputs.append(ours)
        references.append(reference)
    return torch.stack(outputs), torch.stack(references)


@pytest.mark.parametrize(("batch", "length"), [(1, 1), (3, 37), (2, 256)])
def test_each_layer_equals_the_gpt2_block_of_the_shipped_model(
    prove, gpt2_shakespeare, batch, length
):
    ids = random_ids(gpt2_shakespeare, batch, length, seed=length)
    outputs, references = copied_blocks_and_the_librarys(gpt2_shakespeare, ids)
    assert outputs.shape == (4, batch, length, gpt2_shakespeare.config.n_embd)
    prove(
        "GPT-2 block from Part II's modules",
        "`GPT2Block`",
        f"random ids, {batch}×{length}, book's GPT-2, each of its 4 blocks",
        outputs,
        references,
        BLOCK_ATOL,
    )


@pytest.mark.parametrize(("batch", "length"), [(1, 1), (2, 256)])
def test_the_stack_gives_the_logits_of_the_shipped_model(prove, gpt2_shakespeare, batch, length):
    ids = random_ids(gpt2_shakespeare, batch, length, seed=batch)
    logits, reference = stacked_logits(gpt2_shakespeare, ids), gpt2_shakespeare(ids).logits
    prove(
        "GPT-2 from Part II's modules (logits)",
        "`GPT2LMHeadModel`",
        f"random ids, {batch}×{length}, book's GPT-2",
        logits,
        reference,
        SHIPPED_LOGITS_ATOL,
    )
    assert torch.equal(logits.argmax(-1), reference.argmax(-1))


def test_each_layer_equals_the_gpt2_block_at_the_124m_size(prove, gpt2_124m):
    config = gpt2_124m.config
    assert (config.n_layer, config.n_head, config.n_embd) == (12, 12, 768)
    ids = random_ids(gpt2_124m, 2, 512, seed=1)
    outputs, references = copied_blocks_and_the_librarys(gpt2_124m, ids)
    assert outputs.shape == (12, 2, 512, 768)
    prove(
        "GPT-2 block from Part II's modules",
        "`GPT2Block`",
        "random ids, 2×512, GPT-2 124M (random init), each of its 12 blocks",
        outputs,
        references,
        ATOL,
    )


def test_the_stack_gives_the_logits_at_the_124m_size(prove, gpt2_124m):
    ids = random_ids(gpt2_124m, 3, 40, seed=2)
    prove(
        "GPT-2 from Part II's modules (logits)",
        "`GPT2LMHeadModel`",
        "random ids, 3×40, GPT-2 124M (random init)",
        stacked_logits(gpt2_124m, ids),
        gpt2_124m(ids).logits,
        LOGITS_ATOL,
    )


def test_the_layer_is_causal_and_is_the_pre_norm_gelu_encoder_layer():
    """Later tokens change no earlier output; with the causal mask passed by hand, the
    layer is EncoderLayer's pre-norm forward."""
    torch.manual_seed(0)
    layer = DecoderOnlyLayer(64, 4, 256).eval()
    x = torch.randn(2, 10, 64)  # (B, T, C)
    changed = x.clone()
    changed[:, 6:] = torch.randn(2, 4, 64)
    assert torch.equal(layer(x)[:, :6], layer(changed)[:, :6])
    assert not torch.allclose(layer(x)[:, 6:], layer(changed)[:, 6:])
    assert isinstance(layer, EncoderLayer) and layer.norm_first
    causal = torch.ones(10, 10, dtype=torch.bool).tril()
    assert torch.equal(layer(x), EncoderLayer.forward(layer, x, causal))


def test_copying_keeps_the_blocks_dtype(prove):
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=64, n_head=4, vocab_size=50)).eval()
    block = model.transformer.h[0].double()
    layer = copy_gpt2_block(block).eval()
    assert all(p.dtype == torch.float64 for p in layer.parameters())
    x = torch.randn(2, 7, 64, dtype=torch.float64)
    prove(
        "GPT-2 block from Part II's modules, in float64",
        "`GPT2Block` in float64",
        "random 2×7 vectors, a GPT-2 block of width 64 (random init)",
        layer(x),
        block(x),
        1e-12,
    )
