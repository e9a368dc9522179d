"""snippets/gpt2_by_hand.py, the forward pass by hand that docs/gpt2/forward.md,
kv-cache.md and generation.md build on, against transformers' GPT2LMHeadModel, with and
without the KV cache: on the book's shipped GPT-2 and on a randomly initialised GPT-2 of
the real 124M size, on inputs the chapters do not show (batches, full-length sequences,
caches filled in chunks of several tokens). What a single page teaches, its warning boxes
included, is pinned in that page's own file, tests/test_gpt2_<page>.py.
"""

import pytest
import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel

from snippets.gpt2_by_hand import causal_attention, forward, gelu_tanh
from snippets.hub import GPT2_SHAKESPEARE
from tests.inputs import random_ids

ATOL = 1e-4  # float32, logits of magnitude up to ~3: GPT-2 124M with random weights
# float32 logits up to ~20, through the shipped model's residual stream, which reaches 400
# (float32 steps of 3e-5 there): measured 3.6e-5
SHIPPED_ATOL = 5e-4


@torch.no_grad()
@pytest.mark.parametrize(("batch", "length"), [(1, 1), (3, 37), (2, 256)])
def test_logits_equal_the_library_on_the_shipped_model(prove, gpt2_shakespeare, batch, length):
    ids = random_ids(gpt2_shakespeare, batch, length, seed=length)
    logits, present = forward(gpt2_shakespeare, ids)
    prove(
        "GPT-2 forward pass by hand (logits)",
        "`GPT2LMHeadModel`",
        f"random ids, {batch}×{length}, book's GPT-2",
        logits,
        gpt2_shakespeare(ids).logits,
        SHIPPED_ATOL,
    )
    assert len(present) == gpt2_shakespeare.config.n_layer
    assert present[0][0].shape == (batch, 4, length, 64)


@torch.no_grad()
def test_logits_equal_the_library_at_the_124m_size(prove, gpt2_124m):
    assert sum(p.numel() for p in gpt2_124m.parameters()) == 124_439_808
    ids = random_ids(gpt2_124m, 2, 24, seed=1)
    logits, _ = forward(gpt2_124m, ids)
    prove(
        "GPT-2 forward pass by hand (logits)",
        "`GPT2LMHeadModel`",
        "random ids, 2×24, GPT-2 124M (random init)",
        logits,
        gpt2_124m(ids).logits,
        ATOL,
    )


@torch.no_grad()
@pytest.mark.parametrize("keep", [1, 5])
def test_logits_to_keep_equals_the_library_at_the_124m_size(prove, gpt2_124m, keep):
    ids = random_ids(gpt2_124m, 2, 24, seed=3)
    logits, present = forward(gpt2_124m, ids, logits_to_keep=keep)
    assert logits.shape == (2, keep, 50257)
    kept = "the last position" if keep == 1 else f"the last {keep} positions"
    inputs = f"random ids, 2×24, GPT-2 124M (random init), {kept}"
    prove(
        "GPT-2 forward pass by hand with `logits_to_keep` (logits)",
        "`GPT2LMHeadModel` with `logits_to_keep`",
        inputs,
        logits,
        gpt2_124m(ids, logits_to_keep=keep).logits,
        ATOL,
    )
    assert present[0][0].shape[2] == 24  # every position is still cached
    _, cache = forward(gpt2_124m, ids[:, :20])
    step, _ = forward(gpt2_124m, ids[:, 20:], cache, logits_to_keep=1)
    prove(
        "GPT-2 by hand, 4 tokens on a cache of 20 (last logits)",
        "GPT-2 by hand, one pass over the 24 tokens",
        "random ids, 2×24, GPT-2 124M (random init)",
        step,
        logits[:, -1:],
        ATOL,
    )


@torch.no_grad()
def test_cached_steps_equal_the_full_pass_at_the_124m_size(prove, gpt2_124m):
    ids = random_ids(gpt2_124m, 1, 12, seed=2)
    full, _ = forward(gpt2_124m, ids)
    logits, cache = forward(gpt2_124m, ids[:, :5])
    rows = [logits]
    for t in range(5, 12):
        step, cache = forward(gpt2_124m, ids[:, t : t + 1], cache)
        rows.append(step)
    prove(
        "GPT-2 by hand with its KV cache, one token at a time (logits)",
        "GPT-2 by hand, one pass over every token",
        "random ids, 1×12, GPT-2 124M (random init), 5 tokens then 7 steps",
        torch.cat(rows, dim=1),
        full,
        ATOL,
    )


@torch.no_grad()
@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_cache_filled_in_chunks_gives_the_full_logits(prove, gpt2_shakespeare, chunk):
    # up to the last position the model has
    ids = random_ids(gpt2_shakespeare, 2, 256, seed=chunk)
    full, full_cache = forward(gpt2_shakespeare, ids)
    cache, rows = None, []
    for start in range(0, 256, chunk):
        step, cache = forward(gpt2_shakespeare, ids[:, start : start + chunk], cache)
        rows.append(step)
    inputs = f"random ids, 2×256, book's GPT-2, chunks of {chunk}"
    prove(
        "GPT-2 by hand with its KV cache, filled chunk by chunk (logits)",
        "GPT-2 by hand, one pass over every token",
        inputs,
        torch.cat(rows, dim=1),
        full,
        SHIPPED_ATOL,
    )
    # keys and values reach ~18, like the logits: float32 rounding differs by up to ~3e-5
    prove(
        "GPT-2 by hand with its KV cache, filled chunk by chunk (keys and values)",
        "GPT-2 by hand, one pass over every token",
        f"{inputs}, every layer",
        torch.stack([torch.stack(pair) for pair in cache]),
        torch.stack([torch.stack(pair) for pair in full_cache]),
        5e-4,  # measured 3.2e-5 (AMD EPYC, chunks of 1), 1.7e-5 (Intel Xeon)
    )


@torch.no_grad()
def test_the_cache_equals_the_library_cache(prove, gpt2_shakespeare):
    ids = random_ids(gpt2_shakespeare, 2, 20, seed=3)
    _, ours = forward(gpt2_shakespeare, ids)
    theirs = gpt2_shakespeare(ids, use_cache=True).past_key_values
    assert len(ours) == len(theirs.layers)
    prove(
        "KV cache by hand (keys and values)",
        "`GPT2LMHeadModel`'s `past_key_values`",
        "random ids, 2×20, book's GPT-2, every layer",
        torch.stack([torch.stack([keys, values]) for keys, values in ours]),
        torch.stack([torch.stack([layer.keys, layer.values]) for layer in theirs.layers]),
        1e-4,  # float32, values up to 18: measured 9.8e-6
    )


@torch.no_grad()
def test_no_position_reads_the_future(gpt2_shakespeare):
    ids = random_ids(gpt2_shakespeare, 1, 30, seed=4)
    changed = ids.clone()
    changed[0, 20:] = (changed[0, 20:] + 1) % gpt2_shakespeare.config.vocab_size
    before, _ = forward(gpt2_shakespeare, ids)
    after, _ = forward(gpt2_shakespeare, changed)
    assert torch.equal(before[:, :20], after[:, :20])
    assert not torch.allclose(before[:, 20:], after[:, 20:])


@torch.no_grad()
def test_attention_weights_equal_eager_attentions(prove, gpt2_shakespeare):
    """The attention weights by hand equal eager attention's `output_attentions`; the default
    SDPA attention returns no probabilities (the warning "Attention probabilities need the
    eager attention implementation" of docs/bert/self-attention.md, true of GPT-2 too)."""
    ids = random_ids(gpt2_shakespeare, 2, 16, seed=6)
    outputs = gpt2_shakespeare(ids, output_attentions=True, output_hidden_states=True)
    layer = gpt2_shakespeare.transformer.h[2]
    normed = layer.ln_1(outputs.hidden_states[2])
    # the module is told what to mask: the model passes it an additive causal mask
    future = torch.ones(16, 16, dtype=torch.bool).triu(diagonal=1)
    additive = torch.zeros(16, 16).masked_fill(future, torch.finfo(normed.dtype).min)
    reference, weights = layer.attn(normed, attention_mask=additive[None, None])
    inputs = "random ids, 2×16, book's GPT-2, block 2"
    prove(
        "`GPT2Attention` called alone with an additive causal mask (weights)",
        "`GPT2LMHeadModel`'s `output_attentions`",
        inputs,
        weights,
        outputs.attentions[2],
        1e-6,
    )
    prove(
        "causal self-attention by hand",
        "`GPT2Attention`",
        inputs,
        causal_attention(layer.attn, normed)[0],
        reference,
        2e-4,  # float32, values up to 42: measured 1.3e-5 (under compatible-1-thread; 0 as-is)
    )
    default = GPT2LMHeadModel.from_pretrained(GPT2_SHAKESPEARE.repo_id)
    assert default.config._attn_implementation == "sdpa"
    assert not default(ids, output_attentions=True).attentions


def test_gelu_is_the_tanh_approximation(prove):
    x = torch.linspace(-10, 10, 20001)
    prove(
        "GELU by hand, tanh approximation",
        '`F.gelu(x, approximate="tanh")`',
        "20,001 points from -10 to 10",
        gelu_tanh(x),
        F.gelu(x, approximate="tanh"),
        5e-6,  # float32, values up to 10: measured 2.4e-7
    )
    assert not torch.allclose(gelu_tanh(x), F.gelu(x), atol=1e-4)


def test_follows_the_device_of_its_inputs():
    """On the meta device (shapes, no numbers) a tensor made on the CPU raises as it would
    on a GPU, so this proves that every tensor `forward` makes follows its inputs, with and
    without a cache."""
    with torch.device("meta"):
        model = GPT2LMHeadModel(GPT2Config()).eval()
        ids = torch.zeros(2, 7, dtype=torch.long)
    logits, present = forward(model, ids)
    assert logits.shape == (2, 7, 50257) and logits.device.type == "meta"
    logits, present = forward(model, ids[:, :1], present)
    assert logits.shape == (2, 1, 50257) and logits.device.type == "meta"
    assert len(present) == 12
    assert all(k.shape == v.shape == (2, 12, 8, 64) for k, v in present)
    assert all(k.device.type == v.device.type == "meta" for k, v in present)
