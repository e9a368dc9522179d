"""GPT-2's forward pass by hand: torch operations on a GPT2LMHeadModel's own parameters.

No submodule of the model is called. `forward` takes an optional cache of every
layer's keys and values and returns the updated cache, so that feeding tokens one
at a time gives the logits of the full forward pass. docs/gpt2/forward.md and
docs/gpt2/kv-cache.md include this file section by section;
tests/test_snippets_gpt2_by_hand.py proves it equal to transformers' GPT2LMHeadModel.

Shapes: B batch, T new tokens, P cached tokens, S = P + T keys, C hidden size,
H heads, D = C / H head size, V vocabulary size, L layers.
"""

import math

import torch


# --8<-- [start:layer_norm]
def layer_norm(x, norm):
    """Normalize each C-vector to mean 0 and variance 1, then scale and shift it."""
    mean = x.mean(dim=-1, keepdim=True)
    variance = x.var(dim=-1, keepdim=True, correction=0)  # biased, as nn.LayerNorm
    return (x - mean) / torch.sqrt(variance + norm.eps) * norm.weight + norm.bias


# --8<-- [end:layer_norm]


# --8<-- [start:conv1d]
def conv1d(x, layer):
    """GPT-2's Conv1D: a linear layer whose weight is stored (in, out), so x W + b."""
    return x @ layer.weight + layer.bias


# --8<-- [end:conv1d]


# --8<-- [start:attention]
def causal_attention(attn, x, cache=None, head_mask=None):
    """Masked self-attention of x's T tokens over the P cached ones and themselves.

    x: (B, T, C). cache: None, or this layer's (keys, values), each (B, H, P, D).
    head_mask: None, or (H,): each head's output is multiplied by its entry before
    c_proj mixes the heads, so a 0 silences that head (docs/gpt2/looking-inside.md).
    Returns the output (B, T, C) and the new cache, each (B, H, S, D), S = P + T.
    """
    B, T, C = x.shape
    H = attn.num_heads
    D = C // H
    q, k, v = conv1d(x, attn.c_attn).split(C, dim=-1)  # c_attn: (C, 3C), fused; each (B, T, C)
    q = q.view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    k = k.view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    v = v.view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    if cache is not None:
        k = torch.cat([cache[0], k], dim=2)  # (B, H, S, D): the cached keys, then the new
        v = torch.cat([cache[1], v], dim=2)  # (B, H, S, D)
    S = k.shape[2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # (B, H, T, S)
    # new token t sits at position P + t: it may read keys 0 .. P + t, none after
    allowed = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(diagonal=S - T)  # (T, S)
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)  # (B, H, T, S): each row sums to 1
    out = weights @ v  # (B, H, T, D): one output per head
    if head_mask is not None:
        out = out * head_mask.view(H, 1, 1)  # (B, H, T, D): a head times 0 adds nothing
    out = out.transpose(1, 2).reshape(B, T, C)  # (B, T, C): heads side by side
    return conv1d(out, attn.c_proj), (k, v)


# --8<-- [end:attention]


# --8<-- [start:mlp]
def gelu_tanh(x):
    """GPT-2's GELU: the tanh approximation ("gelu_new"), not the exact erf form."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def mlp(block_mlp, x):
    """(B, T, C) -> (B, T, 4C) -> GELU -> (B, T, C)."""
    return conv1d(gelu_tanh(conv1d(x, block_mlp.c_fc)), block_mlp.c_proj)


# --8<-- [end:mlp]


# --8<-- [start:block]
def block(layer, x, cache=None, head_mask=None):
    """One pre-norm block: LayerNorm before each sublayer, the residual around it."""
    attended, new_cache = causal_attention(layer.attn, layer_norm(x, layer.ln_1), cache, head_mask)
    x = x + attended  # (B, T, C)
    x = x + mlp(layer.mlp, layer_norm(x, layer.ln_2))  # (B, T, C)
    return x, new_cache


# --8<-- [end:block]


# --8<-- [start:forward]
def forward(model, input_ids, past_key_values=None, logits_to_keep=0):
    """(B, T) ids -> logits (B, T, V), and every layer's keys and values.

    past_key_values: None, or the `present` of an earlier call: a list of L
    (keys, values) pairs, each (B, H, P, D), for the P tokens before input_ids.
    logits_to_keep: 0 for every position's logits; n for the last n positions only
    (B, n, V), all that choosing the next token needs, as in transformers.
    """
    gpt = model.transformer
    T = input_ids.shape[1]
    P = 0 if past_key_values is None else past_key_values[0][0].shape[2]
    # (T,): the new tokens come after the cached ones
    positions = torch.arange(P, P + T, device=input_ids.device)
    x = gpt.wte.weight[input_ids] + gpt.wpe.weight[positions]  # (B, T, C)
    present = []
    for i, layer in enumerate(gpt.h):
        x, layer_cache = block(layer, x, None if past_key_values is None else past_key_values[i])
        present.append(layer_cache)
    x = x[:, -logits_to_keep:]  # (B, n, C); -0 is 0, so 0 keeps all T
    x = layer_norm(x, gpt.ln_f)  # the final LayerNorm of a pre-norm stack
    logits = x @ model.lm_head.weight.T  # (B, n, V): lm_head is wte, tied
    return logits, present


# --8<-- [end:forward]
