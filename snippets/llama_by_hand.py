"""A Llama-style decoder by hand: what SmolLM2 does differently from GPT-2.

RMSNorm instead of LayerNorm, rotary position embeddings (RoPE) instead of learned
ones, a SwiGLU MLP instead of GELU, grouped-query attention, and plain linear
layers without biases. torch operations on a LlamaForCausalLM's own parameters;
docs/gpt2/smollm2.md includes these sections and tests/test_gpt2_smollm2.py proves
them equal to the library on SmolLM2-135M-Instruct.

Shapes: B batch, T tokens, C hidden size, H query heads, K key-value heads,
D head size, F the MLP's width, V vocabulary size.
"""

import math

import torch
import torch.nn.functional as F


# --8<-- [start:rms_norm]
def rms_norm(x, norm):
    """Divide each C-vector by its root mean square, then scale it: no mean, no bias."""
    mean_square = x.pow(2).mean(dim=-1, keepdim=True)  # (B, T, 1)
    return x * torch.rsqrt(mean_square + norm.variance_epsilon) * norm.weight


# --8<-- [end:rms_norm]


# --8<-- [start:rope]
def rope_angles(config, T, device=None):
    """The rotation angle of every position and feature: (T, D), in float32."""
    D = config.head_dim
    theta = config.rope_parameters["rope_theta"]
    features = torch.arange(0, D, 2, device=device).float()  # (D/2,): 0, 2, 4, ...
    frequencies = theta ** (-features / D)  # (D/2,): from 1 down to ~1/theta
    angles = torch.arange(T, device=device).float()[:, None] * frequencies  # (T, D/2)
    return torch.cat([angles, angles], dim=-1)  # (T, D): feature i pairs with feature i + D/2


def rotate(x, angles):
    """Turn each pair of features (i, i + D/2) of x (B, heads, T, D) by its angle."""
    first, second = x.chunk(2, dim=-1)  # (B, heads, T, D/2) each
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (T, D) each, x's dtype
    return x * cos + torch.cat([-second, first], dim=-1) * sin


# --8<-- [end:rope]


# --8<-- [start:attention]
def grouped_query_attention(attn, x, angles, config):
    """Causal attention with H query heads sharing K key-value heads, and RoPE."""
    B, T, _ = x.shape
    H, K, D = config.num_attention_heads, config.num_key_value_heads, config.head_dim
    q = (x @ attn.q_proj.weight.T).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
    k = (x @ attn.k_proj.weight.T).view(B, T, K, D).transpose(1, 2)  # (B, K, T, D)
    v = (x @ attn.v_proj.weight.T).view(B, T, K, D).transpose(1, 2)  # (B, K, T, D)
    q, k = rotate(q, angles), rotate(k, angles)  # positions enter here, and only here
    k = k.repeat_interleave(H // K, dim=1)  # (B, H, T, D): query head h reads kv head h // (H/K)
    v = v.repeat_interleave(H // K, dim=1)  # (B, H, T, D)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # (B, H, T, T)
    future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(diagonal=1)  # (T, T)
    weights = scores.masked_fill(future, torch.finfo(scores.dtype).min).softmax(dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(B, T, H * D)  # (B, T, C)
    return out @ attn.o_proj.weight.T


# --8<-- [end:attention]


# --8<-- [start:mlp]
def swiglu(mlp, x):
    """(B, T, C) -> (B, T, F) twice: a SiLU gate times a linear path -> (B, T, C)."""
    gate = F.silu(x @ mlp.gate_proj.weight.T)  # (B, T, F)
    return (gate * (x @ mlp.up_proj.weight.T)) @ mlp.down_proj.weight.T


# --8<-- [end:mlp]


# --8<-- [start:forward]
def llama_forward(model, input_ids):
    """(B, T) ids -> logits (B, T, V), on a LlamaForCausalLM's parameters."""
    config = model.config
    x = model.model.embed_tokens.weight[input_ids]  # (B, T, C): no position embedding
    angles = rope_angles(config, input_ids.shape[1], input_ids.device)  # (T, D)
    for layer in model.model.layers:
        x = x + grouped_query_attention(
            layer.self_attn, rms_norm(x, layer.input_layernorm), angles, config
        )  # (B, T, C)
        x = x + swiglu(layer.mlp, rms_norm(x, layer.post_attention_layernorm))  # (B, T, C)
    return rms_norm(x, model.model.norm) @ model.lm_head.weight.T  # (B, T, V)


# --8<-- [end:forward]
