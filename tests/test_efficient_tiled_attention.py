"""The online softmax and tiled attention (snippets/tiled_attention.py) against torch's
softmax and F.scaled_dot_product_attention, on inputs no page shows.

Block and tile sizes that divide the length and that do not, scores large enough that
exp overflows float32 without the running maximum, -inf scores, causal and padding masks,
rows that may see no key, cross-attention (T != S), and GPT-2 124M's and BERT base's
attention at their real sizes. float32; each tolerance at least 10× the largest
difference measured under the three numeric configurations (tools/numerics.py).

Sharp attention (q × 10 or × 20), bfloat16 inputs and the book's GPT-2's own q, k and v
are judged against float64 instead: there tiled attention and SDPA differ from each other
by more than either differs from exact (float32, q × 20: 2.0e-5 apart, 1.3e-5 and 1.6e-5
from float64), so tiled's error must be at most SIMILAR_ERROR times SDPA's. The worst
ratio measured was 1.0 (bfloat16, where both round the output once), so 20 keeps the 10×
margin.

The backward pass (TiledAttention): gradients for q, k and v against SDPA's through
autograd, with masks; differences up to 2.5e-6 measured, tolerance 5e-5.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from snippets.tiled_attention import (
    TiledAttention,
    naive_attention,
    online_softmax,
    peak_tensor_bytes,
    tiled_attention,
)

pytestmark = pytest.mark.usefixtures("no_grad")

SOFTMAX_ATOL = 1e-6  # probabilities up to 1, float32 steps of 6e-8 there
ATTENTION_ATOL = 1e-5  # outputs are averages of values of size about 1 to 4
SIMILAR_ERROR = 20  # tiled's error against float64 at most this many times SDPA's
GRADIENT_ATOL = 5e-5  # gradients of size about 1 to 10


def qkv(shape, seed, kv_length=None):
    generator = torch.Generator().manual_seed(seed)
    B, H, T, D = shape
    S = kv_length or T
    q = torch.randn(B, H, T, D, generator=generator)
    k, v = (torch.randn(B, H, S, D, generator=generator) for _ in range(2))
    return q, k, v


@pytest.mark.parametrize("block_size", [1, 7, 64, 1000])
@pytest.mark.parametrize("scale", [1.0, 200.0])  # 200: exp(score) overflows float32
def test_online_softmax_equals_torchs(prove, block_size, scale):
    generator = torch.Generator().manual_seed(block_size)
    scores = torch.randn(4, 3, 250, generator=generator) * scale
    scores[0, 0, 10:] = -math.inf  # a row that sees only its first 10 columns
    if scale > 1:
        assert torch.isinf(scores.exp()).any()  # the naive exp would overflow
    prove(
        f"online softmax, blocks of {block_size}",
        "`torch.softmax`",
        f"random scores ×{scale:g}, (4, 3, 250), -inf entries",
        online_softmax(scores, block_size),
        scores.softmax(dim=-1),
        SOFTMAX_ATOL,
    )


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(("length", "tile"), [(1, 16), (64, 16), (100, 32), (257, 64)])
def test_tiled_attention_equals_sdpa(prove, is_causal, length, tile):
    q, k, v = qkv((3, 4, length, 16), seed=length)
    prove(
        f"tiled attention, tiles of {tile}" + (", causal" if is_causal else ""),
        "`F.scaled_dot_product_attention`",
        f"random q, k, v, (3, 4, {length}, 16)",
        tiled_attention(q, k, v, is_causal=is_causal, tile=tile),
        F.scaled_dot_product_attention(q, k, v, is_causal=is_causal),
        ATTENTION_ATOL,
    )


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_tiled_attention_with_padding_equals_sdpa(prove, is_causal):
    q, k, v = qkv((3, 2, 90, 32), seed=7)
    lengths = torch.tensor([90, 41, 1])  # real tokens per row, then padding
    padding = torch.arange(90)[None, :] >= lengths[:, None]  # (B, S): True at padding
    allowed = ~padding[:, None, None, :]  # (B, 1, 1, S)
    if is_causal:
        allowed = allowed & torch.ones(90, 90, dtype=torch.bool).tril()
    prove(
        "tiled attention, tiles of 32, padding" + (", causal" if is_causal else ""),
        "`F.scaled_dot_product_attention`",
        "random q, k, v, (3, 2, 90, 32), rows of 90, 41 and 1 real tokens",
        tiled_attention(q, k, v, is_causal=is_causal, key_padding_mask=padding, tile=32),
        F.scaled_dot_product_attention(q, k, v, attn_mask=allowed),
        ATTENTION_ATOL,
    )


def test_a_query_that_sees_no_key_gets_zeros_as_in_sdpa():
    q, k, v = qkv((2, 2, 40, 8), seed=3)
    padding = torch.zeros(2, 40, dtype=torch.bool)
    padding[0] = True  # row 0: every key is padding
    ours = tiled_attention(q, k, v, key_padding_mask=padding, tile=16)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=~padding[:, None, None, :])
    assert not ours.isnan().any()
    assert torch.equal(ours[0], torch.zeros_like(ours[0])) and torch.equal(ours[0], theirs[0])


def test_cross_attention_equals_sdpa(prove):
    q, k, v = qkv((2, 4, 30, 16), seed=11, kv_length=75)  # 30 queries read 75 keys
    prove(
        "tiled attention, tiles of 16, T ≠ S",
        "`F.scaled_dot_product_attention`",
        "random q (2, 4, 30, 16), k and v (2, 4, 75, 16)",
        tiled_attention(q, k, v, tile=16),
        F.scaled_dot_product_attention(q, k, v),
        ATTENTION_ATOL,
    )


@pytest.mark.parametrize(
    ("model", "shape", "is_causal"),
    [("GPT-2 124M", (1, 12, 1024, 64), True), ("BERT base", (2, 12, 512, 64), False)],
    ids=["gpt2-124m", "bert-base"],
)
def test_tiled_attention_at_real_sizes(prove, model, shape, is_causal):
    q, k, v = qkv(shape, seed=shape[2])
    prove(
        "tiled attention, tiles of 128" + (", causal" if is_causal else ""),
        "`F.scaled_dot_product_attention`",
        f"random q, k, v, {tuple(shape)}: {model}'s attention, its full context",
        tiled_attention(q, k, v, is_causal=is_causal),
        F.scaled_dot_product_attention(q, k, v, is_causal=is_causal),
        ATTENTION_ATOL,
    )


def test_the_meter_counts_what_is_alive_at_once():
    def run():
        a = torch.ones(1000)  # 4,000 bytes
        b = torch.ones(2000)  # 8,000 more: 12,000 alive
        del a, b
        torch.ones(500)  # 2,000, after the others are gone

    assert peak_tensor_bytes(run) == 12_000


def test_naive_attention_holds_the_matrix_and_tiled_attention_does_not():
    T, tile = 1024, 128
    q, k, v = qkv((1, 1, T, 64), seed=0)
    matrix = T * T * 4  # float32 scores: 4 MiB
    output = T * 64 * 4
    assert peak_tensor_bytes(lambda: naive_attention(q, k, v)) >= 2 * matrix
    tiled = peak_tensor_bytes(lambda: tiled_attention(q, k, v, tile=tile))
    assert output <= tiled <= output + 16 * tile * max(tile, 64) * 4  # a few tiles' worth
    assert torch.allclose(
        naive_attention(q, k, v), F.scaled_dot_product_attention(q, k, v), atol=1e-5
    )


def operation_names(run, outermost=False):
    """The operations `run()` calls, as the profiler names them; `outermost`: only those
    called from Python, not those that other operations call."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as recorded:
        run()
    events = recorded.events()
    return [e.name for e in events if not outermost or e.cpu_parent is None]


def test_each_tile_runs_20_operations_from_python():
    """The page: without a mask, each tile of keys costs 20 PyTorch operations."""
    counts = []
    for key_tiles in (1, 2, 3):
        q, k, v = qkv((1, 1, 64, 8), seed=4, kv_length=64 * key_tiles)
        run = lambda: tiled_attention(q, k, v, tile=64)  # noqa: B023, E731
        counts.append(len(operation_names(run, outermost=True)))
    assert counts[2] - counts[1] == counts[1] - counts[0] == 20


def test_sdpa_on_the_cpu_runs_a_fused_kernel_that_never_holds_the_matrix():
    """The page: PyTorch runs SDPA on the CPU with a fused kernel, named in the profiler,
    and its memory is that of the output and its buffers, not of a (T, T) matrix."""
    T = 2048
    q, k, v = qkv((1, 1, T, 64), seed=1)
    run = lambda: F.scaled_dot_product_attention(q, k, v)  # noqa: E731
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in operation_names(run)
    assert peak_tensor_bytes(run) < T * T * 4 / 4


def test_causal_tiles_right_of_the_diagonal_are_skipped_and_only_the_diagonal_is_masked():
    """The page: at T = 1024 in tiles of 256, a causal pass computes 10 of the 16 tiles,
    two products each (q kᵀ, then the weights times v), and masks the 4 on the diagonal."""
    q, k, v = qkv((1, 1, 1024, 8), seed=2)
    names = operation_names(lambda: tiled_attention(q, k, v, is_causal=True, tile=256))
    assert names.count("aten::matmul") == 2 * 10
    assert names.count("aten::masked_fill") == 4
    names = operation_names(lambda: tiled_attention(q, k, v, tile=256))
    assert names.count("aten::matmul") == 2 * 16
    assert names.count("aten::masked_fill") == 0


def test_warning_three_mask_conventions_may_attend_real_token_padding():
    """The page's warning. A key_padding_mask (True at padding) given as SDPA's boolean
    attn_mask (True: may attend) raises nothing and attends to the padding only; a Hugging
    Face mask (1 at a real token) given as a float attn_mask is added to the scores and
    hides nothing."""
    q, k, v = qkv((2, 2, 50, 16), seed=5)
    padding = torch.arange(50)[None, :] >= torch.tensor([30, 20])[:, None]  # (B, S)
    right = tiled_attention(q, k, v, key_padding_mask=padding, tile=16)
    as_bool = F.scaled_dot_product_attention(q, k, v, attn_mask=padding[:, None, None, :])
    padding_only = tiled_attention(q, k, v, key_padding_mask=~padding, tile=16)
    assert not torch.allclose(as_bool, right, atol=ATTENTION_ATOL)
    assert torch.allclose(as_bool, padding_only, atol=ATTENTION_ATOL)

    hf_mask = (~padding).long()[:, None, None, :]  # (B, 1, 1, S): 1 at a real token
    as_float = F.scaled_dot_product_attention(q, k, v, attn_mask=hf_mask.float())
    scores = q @ k.transpose(-2, -1) / math.sqrt(16) + hf_mask  # +1 on real tokens
    weights = scores.softmax(dim=-1)
    assert torch.allclose(as_float, weights @ v, atol=ATTENTION_ATOL)
    assert (weights * padding[:, None, None, :]).sum(dim=-1).min() > 0.01  # padding seen
    assert not torch.allclose(as_float, right, atol=ATTENTION_ATOL)


def test_left_padding_a_first_block_that_hides_every_key(prove):
    """Rows whose first block or tile is all -inf or padding, then real keys: the guard
    keeps -inf - (-inf) out of the running sums."""
    scores = torch.randn(2, 3, 40, generator=torch.Generator().manual_seed(9))
    scores[0, 1, :10] = -math.inf
    prove(
        "online softmax, a first block of -inf",
        "`torch.softmax`",
        "random scores (2, 3, 40), a row's first 10 -inf, blocks of 8",
        online_softmax(scores, 8),
        scores.softmax(dim=-1),
        SOFTMAX_ATOL,
    )
    q, k, v = qkv((2, 2, 60, 16), seed=8)
    padding = torch.zeros(2, 60, dtype=torch.bool)
    padding[1, :25] = True  # left padding: the first tile of keys is all padding
    prove(
        "tiled attention, tiles of 16, left padding",
        "`F.scaled_dot_product_attention`",
        "random q, k, v (2, 2, 60, 16), the second row's first 25 keys padding",
        tiled_attention(q, k, v, key_padding_mask=padding, tile=16),
        F.scaled_dot_product_attention(q, k, v, attn_mask=~padding[:, None, None, :]),
        ATTENTION_ATOL,
    )


def test_tiled_memory_grows_like_the_output():
    """The page: without autograd, tiled attention holds its output and a few tiles, the
    same few at every length."""
    beyond_output = []
    for T in (1024, 2048):
        q, k, v = qkv((1, 1, T, 64), seed=T)
        beyond_output.append(peak_tensor_bytes(lambda: tiled_attention(q, k, v)) - T * 64 * 4)  # noqa: B023
    assert beyond_output[0] == beyond_output[1] < 2048 * 2048 * 4 / 8


def test_with_autograd_the_tiles_are_kept_for_the_backward_pass():
    """The page: with autograd on, every tile's weights are kept for the backward pass, so
    the version by hand holds at least one whole (T, T) matrix's worth."""
    T = 1024
    q, k, v = (t.requires_grad_() for t in qkv((1, 1, T, 64), seed=3))
    with torch.enable_grad():
        kept = peak_tensor_bytes(lambda: tiled_attention(q, k, v))
    assert kept >= T * T * 4


def judged_against_float64(prove, what, inputs, q, k, v, is_causal, tile):
    """Tiled attention and SDPA on the same q, k, v, each against SDPA in float64 on those
    very values: tiled's error may be at most SIMILAR_ERROR times SDPA's.

    SDPA's math backend: in bfloat16, the fused CPU kernel raises under ATen's avx2 and
    default capabilities on a CPU with AVX-512 ("pack_vnni2 is only supported when avx512
    is supported", torch 2.13), as two of the numeric configurations run it there. Its
    errors measured equal to the fused kernel's in bfloat16, and from 0.8 to 1.5 times
    them in float32."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    exact = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=is_causal)
    with sdpa_kernel(SDPBackend.MATH):
        sdpa_error = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal).double() - exact
    tiled = tiled_attention(q, k, v, is_causal=is_causal, tile=tile)
    assert tiled.dtype == q.dtype
    prove(
        what,
        "`F.scaled_dot_product_attention` in float64",
        inputs,
        tiled.double(),
        exact,
        SIMILAR_ERROR * sdpa_error.abs().max().item(),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("sharpness", [1, 10, 20])
def test_sharp_attention_and_bfloat16_are_as_exact_as_sdpa(prove, dtype, sharpness):
    """q × 10 or × 20 puts most of a row's weight on a few keys."""
    q, k, v = qkv((2, 4, 300, 32), seed=sharpness)
    q, k, v = (q * sharpness).to(dtype), k.to(dtype), v.to(dtype)
    name = str(dtype).removeprefix("torch.")
    judged_against_float64(
        prove,
        f"tiled attention, tiles of 128, causal, {name}",
        f"random q ×{sharpness}, k, v, (2, 4, 300, 32), in {name}",
        q,
        k,
        v,
        is_causal=True,
        tile=128,
    )


def test_the_books_gpt2s_own_attention_is_as_exact_as_sdpa(prove, gpt2_shakespeare, tempest_ids):
    """q, k and v as each layer of the book's GPT-2 computes them on four windows of 256
    tokens of The Tempest, its whole context: real heads, some of them sharp."""
    captured = []
    hooks = [
        block.attn.c_attn.register_forward_hook(lambda m, i, o: captured.append(o))
        for block in gpt2_shakespeare.transformer.h
    ]
    gpt2_shakespeare(tempest_ids[0, :1024].view(4, 256))
    for hook in hooks:
        hook.remove()
    heads = gpt2_shakespeare.config.n_head
    for layer, qkv_out in enumerate(captured):  # (4, 256, 3C)
        q, k, v = (
            t.unflatten(-1, (heads, -1)).transpose(1, 2)
            for t in qkv_out.split(gpt2_shakespeare.config.n_embd, dim=-1)
        )
        judged_against_float64(
            prove,
            "tiled attention, tiles of 64, causal",
            f"the book's GPT-2's q, k, v, layer {layer}, 4 × 256 tokens",
            q,
            k,
            v,
            is_causal=True,
            tile=64,
        )


@pytest.mark.parametrize(
    ("is_causal", "padded", "length", "tile"),
    [
        (False, False, 100, 32),
        (True, False, 300, 128),
        (False, True, 90, 32),
        (True, True, 257, 64),
    ],
    ids=["full", "causal", "padding", "causal-padding"],
)
def test_the_tiled_backward_pass_gives_sdpas_gradients(prove, is_causal, padded, length, tile):
    q, k, v = (t.requires_grad_() for t in qkv((2, 3, length, 32), seed=length))
    padding = None
    allowed = torch.ones(2, 1, 1, length, dtype=torch.bool)
    if padded:  # the second row: 41 real tokens, then padding
        padding = torch.arange(length)[None, :] >= torch.tensor([length, 41])[:, None]
        allowed = ~padding[:, None, None, :]
    if is_causal:
        allowed = allowed & torch.ones(length, length, dtype=torch.bool).tril()
    d_out = torch.randn(2, 3, length, 32, generator=torch.Generator().manual_seed(0))
    with torch.enable_grad():
        ours = torch.autograd.grad(
            TiledAttention.apply(q, k, v, is_causal, padding, tile), (q, k, v), d_out
        )
        theirs = torch.autograd.grad(
            F.scaled_dot_product_attention(q, k, v, attn_mask=allowed), (q, k, v), d_out
        )
    setting = ", ".join(["causal"] * is_causal + ["padding"] * padded) or "no mask"
    for name, mine, reference in zip("qkv", ours, theirs, strict=True):
        prove(
            f"tiled attention's backward pass, tiles of {tile}, {setting}",
            "`F.scaled_dot_product_attention` through autograd",
            f"the gradient for {name}, random q, k, v, (2, 3, {length}, 32)",
            mine,
            reference,
            GRADIENT_ATOL,
        )


def test_a_query_that_sees_no_key_gets_no_gradient():
    q, k, v = (t.requires_grad_() for t in qkv((2, 2, 40, 8), seed=3))
    padding = torch.zeros(2, 40, dtype=torch.bool)
    padding[0] = True  # row 0: every key is padding
    with torch.enable_grad():
        d_q, d_k, d_v = torch.autograd.grad(
            TiledAttention.apply(q, k, v, False, padding, 16).sum(), (q, k, v)
        )
    for gradient in (d_q, d_k, d_v):
        assert not gradient.isnan().any() and torch.equal(
            gradient[0], torch.zeros_like(gradient[0])
        )


def test_the_tiled_backward_pass_keeps_no_matrix_and_runs_five_products_a_tile():
    """The page: forward and backward together hold a few tiles, not (T, T), where the
    naive version holds three (T, T) matrices; the backward pass runs 5 matrix products
    per tile (q kᵀ again, then dV, dP, dq and dk)."""
    T, tile = 1024, 128
    q, k, v = (t.requires_grad_() for t in qkv((1, 1, T, 64), seed=6))

    def train_step(attention):
        with torch.enable_grad():
            attention(q, k, v).sum().backward()

    naive = peak_tensor_bytes(lambda: train_step(naive_attention))
    tiled = peak_tensor_bytes(
        lambda: train_step(lambda *x: TiledAttention.apply(*x, False, None, tile))
    )
    assert naive >= 3 * T * T * 4  # the weights, kept for the backward pass, dP and dS
    # q, k, v, the output, its gradient, and the three gradients: eight (T, D); a few tiles
    assert tiled <= 8 * T * 64 * 4 + 16 * tile * tile * 4 < T * T * 4
    with torch.enable_grad():
        out = TiledAttention.apply(q, k, v, False, None, tile)
        names = operation_names(lambda: out.sum().backward())
    assert names.count("aten::matmul") == 5 * (T // tile) ** 2


def test_the_backward_pass_passes_gradcheck_in_float64():
    """Finite differences in float64, causal, T not a multiple of the tile, and left
    padding, so that rows that see no key share tiles with rows that do."""
    generator = torch.Generator().manual_seed(2)
    q, k, v = (
        torch.randn(2, 2, 13, 4, generator=generator, dtype=torch.float64).requires_grad_()
        for _ in range(3)
    )
    padding = torch.zeros(2, 13, dtype=torch.bool)
    padding[1, :5] = True  # causal: the second row's queries 0 to 4 see no key
    with torch.enable_grad():
        assert torch.autograd.gradcheck(
            lambda a, b, c: TiledAttention.apply(a, b, c, True, padding, 4), (q, k, v)
        )


def test_the_backward_pass_in_bfloat16_is_as_exact_as_sdpas(prove):
    """bfloat16 inputs, float32 sums: each gradient against float64's, at most SIMILAR_ERROR
    times the error of SDPA's (math backend, as in judged_against_float64)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = (t.to(torch.bfloat16) for t in qkv((2, 4, 300, 32), seed=12))
    d_out = torch.randn(2, 4, 300, 32, generator=torch.Generator().manual_seed(3))

    def gradients(attention, dtype):
        leaves = [t.to(dtype).requires_grad_() for t in (q, k, v)]
        with torch.enable_grad():
            return torch.autograd.grad(attention(*leaves), leaves, d_out.to(dtype))

    exact = gradients(lambda *x: F.scaled_dot_product_attention(*x, is_causal=True), torch.float64)
    with sdpa_kernel(SDPBackend.MATH):
        sdpa = gradients(
            lambda *x: F.scaled_dot_product_attention(*x, is_causal=True), torch.bfloat16
        )
    ours = gradients(lambda *x: TiledAttention.apply(*x, True, None, 128), torch.bfloat16)
    for name, mine, theirs, reference in zip("qkv", ours, sdpa, exact, strict=True):
        assert mine.dtype == torch.bfloat16
        prove(
            "tiled attention's backward pass, tiles of 128, causal, bfloat16",
            "`F.scaled_dot_product_attention`'s gradients in float64",
            f"the gradient for {name}, random q, k, v, (2, 4, 300, 32), in bfloat16",
            mine.double(),
            reference,
            SIMILAR_ERROR * (theirs.double() - reference).abs().max().item(),
        )
