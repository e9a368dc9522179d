"""Part II's modules (snippets/transformer.py), which the chapters of docs/transformer/
build on, against torch.nn, on inputs the chapters do not show.

Full size where it matters (d_model 512, 8 heads, d_ff 2048, as in the paper), random
weights from fixed seeds, batches of 1 and 3, lengths 1, 7 and 64, 1, 4 and 8 heads,
padding (including sequences that are all padding), causal and combined masks, and
cross-attention with different query and key lengths. float32 throughout, each
tolerance at least 10× the largest difference measured under the three numeric
configurations (tools/numerics.py), from 5e-6 to 5e-4 (the gradients of LayerNorm's γ and β,
sums over 192 positions); float64 runs show that the float32 differences are rounding. What a
single page teaches, its warning box included, is pinned in that page's own file,
tests/test_transformer_<page>.py.
"""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from snippets.transformer import (
    DecoderLayer,
    EncoderLayer,
    FeedForward,
    LayerNorm,
    MultiHeadAttention,
    Transformer,
    TransformerConfig,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
)

PAD = 0
D_MODEL, HEADS, D_FF = 512, 8, 2048


def padded_tokens(lengths, total, generator):
    """(B, total) token ids 1..99, each row padded with PAD after its length."""
    tokens = torch.randint(1, 100, (len(lengths), total), generator=generator)
    positions = torch.arange(total)
    return tokens.masked_fill(positions >= torch.tensor(lengths)[:, None], PAD)


def lengths_for(batch, total):
    """Row lengths for a batch: full, partly padded, and (from 3 rows) entirely padding."""
    return [total, max(1, total // 2), 0][:batch] if batch > 1 else [total]


# ------------------------------------------------------------- attention


ATTENTION_CASES = [
    (batch, t, s, heads)
    for batch in (1, 3)
    for t, s in ((1, 1), (7, 7), (64, 64), (7, 64))  # the last: cross-attention, T != S
    for heads in (1, 8)
]


@pytest.mark.parametrize("mask_kind", ["none", "padding", "causal", "combined"])
@pytest.mark.parametrize(("batch", "t", "s", "heads"), ATTENTION_CASES)
def test_attention_equals_sdpa_outputs_and_gradients(prove, batch, t, s, heads, mask_kind):
    generator = torch.Generator().manual_seed(batch * 1000 + t * 10 + s + heads)
    keys = padded_tokens(lengths_for(batch, s), s, generator)
    causal = causal_mask(t) if t == s else None  # causal masks are for self-attention
    masks = {
        "none": None,
        "padding": padding_mask(keys, PAD),
        "causal": causal,
        "combined": None if causal is None else padding_mask(keys, PAD) & causal,
    }
    mask = masks[mask_kind]
    if mask_kind != "none" and mask is None:
        pytest.skip("cross-attention (T != S) has no causal mask")
    q = torch.randn(batch, heads, t, 64, generator=generator, requires_grad=True)
    k = torch.randn(batch, heads, s, 64, generator=generator, requires_grad=True)
    v = torch.randn(batch, heads, s, 64, generator=generator, requires_grad=True)
    ours, weights = scaled_dot_product_attention(q, k, v, mask)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    # one row of the proof table for every case: the largest difference over all of them
    inputs = (
        "random queries, keys and values, batches of 1 and 3, 1 to 64 queries and keys, "
        "1 and 8 heads, every mask"
    )
    reference = "`F.scaled_dot_product_attention`"
    # float32, values up to 4: measured 7.2e-7
    prove("scaled dot-product attention by hand", reference, inputs, ours, theirs, 1e-5)
    assert weights.shape == (batch, heads, t, s)
    upstream = torch.randn(ours.shape, generator=generator)
    # backward sums over up to 64 keys in another order than PyTorch's: float32 rounding
    prove(
        "scaled dot-product attention by hand (gradients of queries, keys and values)",
        reference,
        inputs,
        torch.cat([g.flatten() for g in torch.autograd.grad(ours, (q, k, v), upstream)]),
        torch.cat([g.flatten() for g in torch.autograd.grad(theirs, (q, k, v), upstream)]),
        2e-5,  # float32, values up to 5: measured 1.7e-6
    )
    if mask is not None:
        forbidden = ~mask.expand_as(weights)
        assert (weights[forbidden] == 0).all()


def test_fully_masked_rows_give_zero_weights_no_nan_and_finite_gradients():
    tokens = torch.tensor([[0, 0, 0, 0], [0, 0, 3, 4]])  # all padding; left padding
    mask = padding_mask(tokens, PAD) & causal_mask(4)  # rows 0-3 of b=0, rows 0-1 of b=1 empty
    q, k, v = (torch.randn(2, 4, 4, 16, requires_grad=True) for _ in range(3))
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    empty = ~mask.any(dim=-1)  # (B, 1, T)
    assert empty.sum() == 4 + 2
    assert not out.isnan().any() and not weights.isnan().any()
    assert (weights[empty.expand(2, 4, 4)] == 0).all() and (out[empty.expand(2, 4, 4)] == 0).all()
    assert torch.allclose(weights.sum(-1)[~empty.expand(2, 4, 4)], torch.tensor(1.0))
    out.sum().backward()
    assert all(torch.isfinite(x.grad).all() for x in (q, k, v))


def test_attention_in_float64_and_half_width_types(prove):
    q, k, v = (torch.randn(2, 3, 5, 8, dtype=torch.float64) for _ in range(3))
    mask = causal_mask(5)
    ours, _ = scaled_dot_product_attention(q, k, v, mask)
    assert ours.dtype == torch.float64
    prove(
        "scaled dot-product attention by hand, in float64",
        "`F.scaled_dot_product_attention`",
        "random 2×3×5×8 queries, keys and values, causal mask",
        ours,
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        1e-12,
    )


# ------------------------------------------------------------- multi-head attention


@pytest.mark.parametrize(("batch", "t", "s"), [(1, 1, 1), (3, 7, 7), (3, 64, 64), (3, 7, 64)])
@pytest.mark.parametrize("heads", [1, 4, 8])
def test_multi_head_attention_equals_nn_multihead_attention(prove, batch, t, s, heads):
    torch.manual_seed(heads)
    reference = nn.MultiheadAttention(D_MODEL, heads, batch_first=True)
    ours = MultiHeadAttention.from_torch(reference)
    generator = torch.Generator().manual_seed(t + s)
    query = torch.randn(batch, t, D_MODEL, generator=generator, requires_grad=True)
    memory = torch.randn(batch, s, D_MODEL, generator=generator, requires_grad=True)
    keys = padded_tokens(lengths_for(batch, s)[:2] + [s] * (batch - 2), s, generator)  # no empty

    # cross-attention with key padding
    out, weights = ours(query, memory, memory, padding_mask(keys, PAD))
    ref_out, ref_weights = reference(
        query, memory, memory, key_padding_mask=keys == PAD, average_attn_weights=False
    )
    # one row of the proof table for each comparison: the largest difference over the cases
    inputs = "random inputs, d_model 512, batches of 1 and 3, 1 to 64 tokens, 1, 4 and 8 heads"
    cross = f"{inputs}, cross-attention with key padding"
    name = "multi-head attention by hand"
    reference_name = "`nn.MultiheadAttention`"
    prove(f"{name} (output)", reference_name, cross, out, ref_out, 1e-5)
    # float32 probabilities: measured 2.4e-7
    prove(f"{name} (attention weights)", reference_name, cross, weights, ref_weights, 5e-6)
    upstream = torch.randn(out.shape, generator=generator)
    params = [ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight, ours.out_proj.weight]
    mine = torch.autograd.grad(out, [query, memory, *params], upstream)
    theirs = torch.autograd.grad(
        ref_out, [query, memory, reference.in_proj_weight, reference.out_proj.weight], upstream
    )
    prove(
        f"{name} (gradients of the inputs and the weights)",
        reference_name,
        cross,
        # in_proj = [W_q; W_k; W_v]
        torch.cat([g.flatten() for g in (mine[0], mine[1], torch.cat(mine[2:5]), mine[5])]),
        torch.cat([g.flatten() for g in theirs]),
        1e-4,  # float32, sums over up to 192 positions, values up to 17: measured 7.6e-6
    )

    # self-attention with a causal mask combined with padding; torch takes (B·H, T, T)
    queries = keys[:, :t] if t <= s else padded_tokens([t] * batch, t, generator)
    mask = padding_mask(queries, PAD) & causal_mask(t)  # (B, 1, T, T)
    mask = mask | ~mask.any(dim=-1, keepdim=True)  # keep rows torch can softmax (no empty row)
    out, weights = ours(query, query, query, mask)
    ref_out, ref_weights = reference(
        query,
        query,
        query,
        attn_mask=~mask[:, 0].repeat_interleave(heads, 0),
        average_attn_weights=False,
    )
    causal = f"{inputs}, self-attention with causal and padding masks"
    prove(f"{name} (output)", reference_name, causal, out, ref_out, 1e-5)
    prove(f"{name} (attention weights)", reference_name, causal, weights, ref_weights, 5e-6)


def test_multi_head_attention_sequences_of_padding_only(prove):
    """A sequence that is all padding: zeros from ours; the real sequences still equal torch's."""
    torch.manual_seed(0)
    reference = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True)
    ours = MultiHeadAttention.from_torch(reference)
    keys = torch.tensor([[4, 5, 6, 0], [0, 0, 0, 0], [7, 8, 9, 1]])
    x, memory = torch.randn(3, 5, D_MODEL), torch.randn(3, 4, D_MODEL)
    out, weights = ours(x, memory, memory, padding_mask(keys, PAD))
    ref_out, _ = reference(x, memory, memory, key_padding_mask=keys == PAD)
    assert not out.isnan().any()
    assert (weights[1] == 0).all()
    assert torch.allclose(out[1], ours.out_proj.bias.expand(5, -1))  # zero attention, then bias
    prove(
        "multi-head attention by hand (output)",
        "`nn.MultiheadAttention`",
        "random inputs, 3×5 queries, 3×4 keys, d_model 512, 8 heads, the 2 rows not all padding",
        out[[0, 2]],
        ref_out[[0, 2]],
        1e-5,
    )


def test_from_torch_copies_the_weights_and_does_not_share_them():
    reference = nn.MultiheadAttention(64, 4, batch_first=True)
    ours = MultiHeadAttention.from_torch(reference)
    x = torch.randn(2, 3, 64)
    before = ours(x, x, x)[0]
    with torch.no_grad():
        reference.in_proj_weight.add_(1.0)
    assert torch.equal(ours(x, x, x)[0], before)


# ------------------------------------------------------------- feed-forward and LayerNorm


@pytest.mark.parametrize("shape", [(1, 1, D_MODEL), (3, 64, D_MODEL), (5, 7, 4)])
@pytest.mark.parametrize("eps", [1e-5, 1e-6, 1e-12])
def test_layer_norm_equals_nn_layer_norm_outputs_and_gradients(prove, shape, eps):
    torch.manual_seed(0)
    reference = nn.LayerNorm(shape[-1], eps=eps)
    with torch.no_grad():
        reference.weight.normal_()
        reference.bias.normal_()
    ours = LayerNorm(shape[-1], eps=eps)
    ours.load_state_dict(reference.state_dict())  # same parameter names: weight, bias
    x = (5 * torch.randn(shape) - 2).requires_grad_()
    out, ref_out = ours(x), reference(x)
    inputs = "random vectors of 4 and 512, 1 to 192 of them, ε 1e-5, 1e-6 and 1e-12"
    # float32, values up to 13 (random γ and β): measured 2.9e-6
    prove("LayerNorm by hand", "`nn.LayerNorm`", inputs, out, ref_out, 5e-5)
    upstream = torch.randn(shape)
    mine = torch.autograd.grad(out, [x, ours.weight, ours.bias], upstream)
    theirs = torch.autograd.grad(ref_out, [x, reference.weight, reference.bias], upstream)
    # float32, gradients up to 3: measured 1.2e-6 (AMD EPYC under compatible-1-thread;
    # 6e-7 as-is)
    prove(
        "LayerNorm by hand (gradient of the input)",
        "`nn.LayerNorm`",
        inputs,
        mine[0],
        theirs[0],
        2e-5,
    )
    # γ's and β's gradients are sums over all B·T positions, of size up to 50: float32
    # keeps about 7 significant digits of them (measured: 2.5e-5)
    prove(
        "LayerNorm by hand (gradients of γ and β)",
        "`nn.LayerNorm`",
        inputs,
        torch.cat(mine[1:]),
        torch.cat(theirs[1:]),
        5e-4,
    )


def test_feed_forward_is_position_wise_with_relu_or_gelu():
    torch.manual_seed(0)
    x = torch.randn(3, 7, D_MODEL)
    for activation in (F.relu, F.gelu):
        ffn = FeedForward(D_MODEL, D_FF, activation)
        by_hand = ffn.linear2(activation(ffn.linear1(x)))
        assert torch.allclose(ffn(x), by_hand)
        for t in range(7):
            assert torch.allclose(ffn(x[:, t]), ffn(x)[:, t], atol=1e-6)


# ------------------------------------------------------------- layers


LAYER_INPUTS = (
    "random inputs, d_model 512, batches of 1 and 3, 1 to 64 tokens, 1 and 8 heads, "
    "pre- and post-norm, ReLU and GELU"
)
LAYER_CASES = [
    (batch, t, s, heads, norm_first, activation)
    for batch, t, s in ((1, 1, 1), (3, 7, 64), (3, 64, 7))
    for heads in (1, 8)
    for norm_first in (False, True)
    for activation in ("relu", "gelu")
    if heads == 8 or (batch, t) == (3, 7)
]


@pytest.mark.parametrize(("batch", "t", "s", "heads", "norm_first", "activation"), LAYER_CASES)
def test_encoder_layer_equals_nn(prove, batch, t, s, heads, norm_first, activation):
    torch.manual_seed(1)
    reference = nn.TransformerEncoderLayer(
        D_MODEL, heads, D_FF, batch_first=True, norm_first=norm_first, activation=activation
    ).eval()
    ours = EncoderLayer.from_torch(reference).eval()
    generator = torch.Generator().manual_seed(s)
    source = padded_tokens(lengths_for(batch, s), s, generator)  # the third row: all padding
    x = torch.randn(batch, s, D_MODEL, generator=generator)
    out = ours(x, padding_mask(source, PAD))
    ref_out = reference(x, src_key_padding_mask=source == PAD)
    real = (source != PAD).any(dim=1)  # torch gives NaN for an all-padding sequence
    assert not out.isnan().any()
    inputs = LAYER_INPUTS
    # float32, values up to 5: measured 1.2e-6 (AMD EPYC; 8 heads, GELU)
    prove(
        "encoder layer by hand, padding mask",
        "`nn.TransformerEncoderLayer`",
        f"{inputs}, the rows not all padding",
        out[real],
        ref_out[real],
        2e-5,
    )
    # and with a causal mask instead, as a decoder-only model would use it
    out = ours(x, causal_mask(s))
    # float32, values up to 5: measured 1.2e-6
    prove(
        "encoder layer by hand, causal mask",
        "`nn.TransformerEncoderLayer`",
        inputs,
        out,
        reference(x, src_mask=~causal_mask(s)),
        2e-5,
    )


@pytest.mark.parametrize(("batch", "t", "s", "heads", "norm_first", "activation"), LAYER_CASES)
def test_decoder_layer_equals_nn(prove, batch, t, s, heads, norm_first, activation):
    torch.manual_seed(2)
    reference = nn.TransformerDecoderLayer(
        D_MODEL, heads, D_FF, batch_first=True, norm_first=norm_first, activation=activation
    ).eval()
    ours = DecoderLayer.from_torch(reference).eval()
    generator = torch.Generator().manual_seed(t * 100 + s)
    source = padded_tokens(lengths_for(batch, s)[:2] + [s] * (batch - 2), s, generator)
    target = padded_tokens([t, max(1, t - 3), t][:batch], t, generator)  # right-padded
    x = torch.randn(batch, t, D_MODEL, generator=generator)
    memory = torch.randn(batch, s, D_MODEL, generator=generator)
    out = ours(x, memory, padding_mask(target, PAD) & causal_mask(t), padding_mask(source, PAD))
    ref_out = reference(
        x,
        memory,
        tgt_mask=~causal_mask(t),
        tgt_key_padding_mask=target == PAD,
        memory_key_padding_mask=source == PAD,
    )
    # float32, values up to 5: measured 1.2e-6
    prove(
        "decoder layer by hand, causal, padding and memory masks",
        "`nn.TransformerDecoderLayer`",
        LAYER_INPUTS,
        out,
        ref_out,
        2e-5,
    )


def test_layers_follow_the_dtype_of_the_module_they_copy(prove):
    reference = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True).double().eval()
    ours = EncoderLayer.from_torch(reference).eval()
    assert all(p.dtype == torch.float64 for p in ours.parameters())
    x = torch.randn(2, 5, 64, dtype=torch.float64)
    prove(
        "encoder layer by hand, in float64",
        "`nn.TransformerEncoderLayer` in float64",
        "random 2×5 vectors, d_model 64, 4 heads",
        ours(x),
        reference(x),
        1e-12,
    )


# ------------------------------------------------------------- the full model


def stacks(model, src, tgt):
    """Ours, run as nn.Transformer runs: on embedded inputs, returning the decoder's output."""
    src_allowed = padding_mask(src, PAD)
    tgt_allowed = padding_mask(tgt, PAD) & causal_mask(tgt.size(1))
    src_x, tgt_x = model.embed(src), model.embed(tgt)
    memory = model.encoder(src_x, src_allowed)
    return src_x, tgt_x, model.decoder(tgt_x, memory, tgt_allowed, src_allowed)


def reference_stacks(reference, src, tgt, src_x, tgt_x):
    return reference(
        src_x,
        tgt_x,
        tgt_mask=~causal_mask(tgt.size(1)),
        src_key_padding_mask=src == PAD,
        tgt_key_padding_mask=tgt == PAD,
        memory_key_padding_mask=src == PAD,
    )


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True:UserWarning")
@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")
@pytest.mark.parametrize(("norm_first", "layers"), [(False, 6), (True, 2)])
def test_transformer_stacks_equal_nn_transformer_at_base_size(prove, norm_first, layers):
    torch.manual_seed(3)
    reference = nn.Transformer(  # the paper's base widths; its 6 + 6 layers for post-norm
        batch_first=True,
        norm_first=norm_first,
        num_encoder_layers=layers,
        num_decoder_layers=layers,
    ).eval()
    model = Transformer.from_torch(reference, vocab_size=100).eval()
    generator = torch.Generator().manual_seed(4)
    src = padded_tokens([9, 4, 1], 9, generator)
    tgt = padded_tokens([6, 6, 2], 6, generator)
    src_x, tgt_x, out = stacks(model, src, tgt)
    ref_out = reference_stacks(reference, src, tgt, src_x, tgt_x)
    inputs = (
        f"padded 3×9 sources and 3×6 targets, the paper's base widths, "
        f"{'pre' if norm_first else 'post'}-norm, {layers} + {layers} layers"
    )
    atol = {6: 5e-5, 2: 2e-5}[layers]  # float32, values up to 4: measured 4.2e-6 and 1.8e-6
    prove("encoder-decoder stacks by hand", "`nn.Transformer`", inputs, out, ref_out, atol)
    prove(
        "Transformer by hand (logits)",
        "its decoder's output through the tied embedding",
        inputs,
        model(src, tgt),
        F.linear(out, model.embed.token.weight),
        1e-5,
    )
    with torch.no_grad():  # torch's inference fast path (nested tensors in its encoder)
        fast = reference_stacks(reference, src, tgt, src_x, tgt_x)
    prove(
        "encoder-decoder stacks by hand",
        "`nn.Transformer`, inference fast path",
        f"{inputs}, under `torch.no_grad()`",
        out,
        fast,
        atol,
    )


def test_transformer_from_torch_keeps_layer_counts_and_sizes():
    reference = nn.Transformer(
        d_model=64,
        nhead=2,
        num_encoder_layers=1,
        num_decoder_layers=3,
        dim_feedforward=96,
        dropout=0.2,
        activation="gelu",
        layer_norm_eps=1e-6,
        batch_first=True,
    )
    model = Transformer.from_torch(reference, vocab_size=30, max_len=40, pad_id=PAD)
    assert (len(model.encoder.layers), len(model.decoder.layers)) == (1, 3)
    config = model.config
    assert (config.d_model, config.num_heads, config.d_ff, config.dropout) == (64, 2, 96, 0.2)
    assert config.activation is F.gelu and config.eps == 1e-6 and config.max_len == 40
    layer_params = sum(p.numel() for p in reference.parameters())
    assert sum(p.numel() for p in model.parameters()) == layer_params + 30 * 64  # + shared table


def test_transformer_in_float64_differs_only_by_rounding(prove):
    torch.manual_seed(5)
    reference = (
        nn.Transformer(
            d_model=128,
            nhead=8,
            num_encoder_layers=3,
            num_decoder_layers=3,
            dim_feedforward=256,
            batch_first=True,
        )
        .double()
        .eval()
    )
    model = Transformer.from_torch(reference, vocab_size=100).eval()
    assert model.embed.token.weight.dtype == torch.float64
    generator = torch.Generator().manual_seed(6)
    src, tgt = padded_tokens([7, 3], 7, generator), padded_tokens([5, 2], 5, generator)
    src_x, tgt_x, out = stacks(model, src, tgt)
    prove(
        "encoder-decoder stacks by hand, in float64",
        "`nn.Transformer` in float64",
        "padded 2×7 sources and 2×5 targets, d_model 128, 8 heads, 3 + 3 layers",
        out,
        reference_stacks(reference, src, tgt, src_x, tgt_x),
        1e-12,
    )


def test_paper_base_model_size_and_weight_tying():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig())
    assert sum(p.numel() for p in model.parameters()) == 63_084_544  # the paper: about 65 M
    assert model.embed.token.weight.std().item() == pytest.approx(512**-0.5, rel=0.01)


def test_decoder_is_causal_end_to_end():
    torch.manual_seed(7)
    config = TransformerConfig(
        vocab_size=20, d_model=64, num_heads=4, d_ff=128, num_encoder_layers=2, num_decoder_layers=2
    )
    model = Transformer(config).eval()
    src = torch.tensor([[3, 4, 5, 0], [6, 7, 8, 9]])
    tgt = torch.tensor([[1, 10, 11, 12, 13], [1, 14, 15, 0, 0]])
    logits = model(src, tgt)
    for t in range(5):
        changed = tgt.clone()
        changed[:, t:] = 19
        assert torch.equal(model(src, changed)[:, :t], logits[:, :t])
    other = copy.deepcopy(src)
    other[0, 3] = 17  # was padding: the model reads it now
    assert not torch.allclose(model(other, tgt)[0], logits[0])
