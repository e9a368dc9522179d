"""Attention without the T×T matrix: the online softmax, then attention one tile at a time
(FlashAttention's algorithm, on the CPU).

docs/efficient/tiled-attention.md includes the sections marked below;
tests/test_efficient_tiled_attention.py proves them equal to torch's softmax and to
F.scaled_dot_product_attention.
"""

import math

import torch


# --8<-- [start:online_softmax]
def online_softmax(scores, block_size):
    """softmax over the last dimension of scores (..., S), reading it `block_size` columns
    at a time and keeping only two numbers per row between blocks: the largest score so
    far, m (row_max), and the sum so far of exp(score - m), ℓ (row_sum)."""
    row_max = torch.full(scores.shape[:-1], -math.inf)  # (...,): m
    row_sum = torch.zeros(scores.shape[:-1])  # (...,): ℓ
    for start in range(0, scores.size(-1), block_size):
        block = scores[..., start : start + block_size]  # (..., block)
        new_row_max = torch.maximum(row_max, block.amax(dim=-1))  # (...,): m'
        # a row that has seen only -inf so far: subtract 0, as -inf - (-inf) is NaN
        shift = torch.where(new_row_max == -math.inf, 0.0, new_row_max)  # (...,)
        # the sum so far was taken against the old maximum: rescale it to the new one
        row_sum = row_sum * torch.exp(row_max - shift)
        row_sum = row_sum + torch.exp(block - shift[..., None]).sum(dim=-1)
        row_max = new_row_max
    # a second pass only to write the probabilities out; attention never needs them
    return torch.exp(scores - row_max[..., None]) / row_sum[..., None]


# --8<-- [end:online_softmax]


# --8<-- [start:tiled]
def hidden_keys(is_causal, key_padding_mask, t0, tq, s0, ts):
    """Where the (tq, ts) tile of scores of queries t0.. and keys s0.. is hidden, as a
    mask that broadcasts to (B, H, tq, ts), or None where nothing is: only diagonal
    tiles (is_causal) and tiles with padding are masked."""
    hidden = None
    if is_causal and s0 + ts - 1 > t0:  # a key of this tile lies after a query
        cols, rows = torch.arange(s0, s0 + ts), torch.arange(t0, t0 + tq)
        hidden = cols[None, :] > rows[:, None]  # (tq, ts)
    if key_padding_mask is not None:
        padded = key_padding_mask[:, None, None, s0 : s0 + ts]  # (B, 1, 1, ts)
        hidden = padded if hidden is None else hidden | padded
    return hidden


def tiled_attention(q, k, v, is_causal=False, key_padding_mask=None, tile=256, return_lse=False):
    """softmax(q kᵀ / √D) v for q (B, H, T, D), k and v (B, H, S, D), one (tile × tile)
    block of scores at a time: the (T, S) matrix of scores is never built. Inputs in
    float32 or float64, or in bfloat16 or float16 with float32 sums; the output has the
    inputs' dtype.

    is_causal: query t sees keys 0..t (T == S), as F.scaled_dot_product_attention's
    is_causal. key_padding_mask: (B, S) bool, True at padding, a key to ignore, as
    nn.MultiheadAttention's. A query that may see no key gets a zero output, as in
    F.scaled_dot_product_attention.
    return_lse: also return each query's log-sum-exp m + log ℓ, (B, H, T), +inf for a
    query that sees no key: all the backward pass keeps of the weights.
    """
    T, D = q.shape[-2:]  # q: (B, H, T, D)
    S = k.size(2)
    assert not is_causal or T == S, "is_causal: as many queries as keys"
    dtype = torch.promote_types(q.dtype, torch.float32)  # of the sums: float32 at least
    out = torch.zeros_like(q)  # (B, H, T, D), in the inputs' dtype
    lse = q.new_zeros(q.shape[:-1], dtype=dtype) if return_lse else None  # (B, H, T)
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    for t0 in range(0, T, tile):
        q_tile = q[:, :, t0 : t0 + tile] / math.sqrt(D)  # (B, H, tq, D)
        tq = q_tile.size(2)
        row_max = q.new_full(q_tile.shape[:-1], -math.inf)  # (B, H, tq): m
        row_sum = q.new_zeros(q_tile.shape[:-1])  # (B, H, tq): ℓ, sum of exp(score - m)
        acc = torch.zeros_like(q_tile)  # (B, H, tq, D): sum of exp(score - m) · v
        # is_causal: the tiles right of the diagonal hold no key these queries may see
        stop = min(S, t0 + tq) if is_causal else S
        for s0 in range(0, stop, tile):
            k_tile = k[:, :, s0 : s0 + tile]  # (B, H, ts, D)
            v_tile = v[:, :, s0 : s0 + tile]  # (B, H, ts, D)
            scores = q_tile @ k_tile.transpose(-2, -1)  # (B, H, tq, ts): this tile only
            hidden = hidden_keys(is_causal, key_padding_mask, t0, tq, s0, k_tile.size(2))
            if hidden is not None:
                scores = scores.masked_fill(hidden, -math.inf)
            new_row_max = torch.maximum(row_max, scores.amax(dim=-1))  # (B, H, tq): m'
            # a row with no key seen yet has row_max -inf: subtract 0, not -inf (NaN)
            shift = torch.where(new_row_max == -math.inf, 0.0, new_row_max)
            weights = torch.exp(scores - shift[..., None])  # (B, H, tq, ts); 0 if hidden
            rescale = torch.exp(row_max - shift)  # (B, H, tq): old sums to the new maximum
            row_sum = row_sum * rescale + weights.sum(dim=-1)
            acc = acc * rescale[..., None] + weights @ v_tile
            row_max = new_row_max
        # a row that saw no key has row_sum 0 and acc 0: its output stays 0
        tiny = torch.finfo(row_sum.dtype).tiny
        out[:, :, t0 : t0 + tile] = acc / row_sum.clamp(min=tiny)[..., None]
        if return_lse:
            lse[:, :, t0 : t0 + tile] = torch.where(row_sum > 0, row_max + row_sum.log(), math.inf)
    return (out, lse) if return_lse else out


# --8<-- [end:tiled]


# --8<-- [start:naive]
def naive_attention(q, k, v):
    """softmax(q kᵀ / √D) v with the whole (T, S) matrix of scores, then of weights."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, T, S)
    return scores.softmax(dim=-1) @ v  # (B, H, T, D)


# --8<-- [end:naive]


# --8<-- [start:backward]
class TiledAttention(torch.autograd.Function):
    """tiled_attention with a backward pass that builds no (T, S) matrix either: the
    forward pass keeps what FlashAttention-2 keeps, the output and each query's
    log-sum-exp L = m + log ℓ, and the backward pass recomputes each tile's weights from
    them. Inputs of any dtype tiled_attention takes, sums in float32 at least; first
    derivatives only. TiledAttention.apply(q, k, v, is_causal, key_padding_mask, tile)."""

    @staticmethod
    def forward(ctx, q, k, v, is_causal=False, key_padding_mask=None, tile=256):
        out, lse = tiled_attention(q, k, v, is_causal, key_padding_mask, tile, return_lse=True)
        ctx.save_for_backward(q, k, v, out, lse)  # no (T, S) matrix among them
        ctx.is_causal, ctx.key_padding_mask, ctx.tile = is_causal, key_padding_mask, tile
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable  # lse is kept as a constant
    def backward(ctx, d_out):  # d_out: (B, H, T, D), the loss's gradient for the output
        dtype = d_out.dtype
        q, k, v, out, lse = ctx.saved_tensors
        q, k, v, out, d_out = (t.to(lse.dtype) for t in (q, k, v, out, d_out))  # as forward
        (T, D), S, tile = q.shape[-2:], k.size(2), ctx.tile
        d_q, d_k, d_v = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        # Δ_t = Σ_s P_ts dP_ts, where dP = dO vᵀ: one dot product per query, dO_t · O_t
        delta = (d_out * out).sum(dim=-1)  # (B, H, T)
        for t0 in range(0, T, tile):
            q_tile = q[:, :, t0 : t0 + tile] / math.sqrt(D)  # (B, H, tq, D), as forward
            tq = q_tile.size(2)
            rows = slice(t0, t0 + tq)
            stop = min(S, t0 + tq) if ctx.is_causal else S
            for s0 in range(0, stop, tile):
                k_tile, v_tile = k[:, :, s0 : s0 + tile], v[:, :, s0 : s0 + tile]
                ts = k_tile.size(2)
                cols = slice(s0, s0 + ts)
                scores = q_tile @ k_tile.transpose(-2, -1)  # (B, H, tq, ts), again
                hidden = hidden_keys(ctx.is_causal, ctx.key_padding_mask, t0, tq, s0, ts)
                if hidden is not None:
                    scores = scores.masked_fill(hidden, -math.inf)
                weights = torch.exp(scores - lse[:, :, rows, None])  # P, recomputed
                d_v[:, :, cols] += weights.transpose(-2, -1) @ d_out[:, :, rows]
                d_weights = d_out[:, :, rows] @ v_tile.transpose(-2, -1)  # dP (B, H, tq, ts)
                d_scores = weights * (d_weights - delta[:, :, rows, None])  # dS = P ∘ (dP − Δ)
                d_q[:, :, rows] += d_scores @ k_tile / math.sqrt(D)
                d_k[:, :, cols] += d_scores.transpose(-2, -1) @ q_tile
        return d_q.to(dtype), d_k.to(dtype), d_v.to(dtype), None, None, None


# --8<-- [end:backward]


# --8<-- [start:peak_memory]
def peak_tensor_bytes(run):
    """The most bytes of tensors that `run()` held alive at once, as torch's profiler
    counts them: each allocation and each free, in the order they happened."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as recorded:
        run()
    # the raw events (a private attribute): recorded.events() first builds a tree of
    # every operation, which is slow on tiled attention's thousands of small ones
    changes = sorted(
        (event.start_ns(), event.nbytes())
        for event in recorded.profiler.kineto_results.events()
        if event.name() == "[memory]"
    )
    alive = peak = 0
    for _, change in changes:
        alive += change
        peak = max(peak, alive)
    return peak


# --8<-- [end:peak_memory]
