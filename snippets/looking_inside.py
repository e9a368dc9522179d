"""Looking inside GPT-2: the logit lens and head ablation, on the forward pass by hand.

`logit_lens` reads the residual stream before the first block and after each block
through the final LayerNorm and the tied unembedding, as if the model stopped there;
its last row is the model's logits. `ablate_heads` runs the model with chosen
attention heads silenced: each one's output is zeroed before `c_proj` mixes the heads,
the slice a forward pre-hook on `c_proj` would zero in transformers' GPT2LMHeadModel.
`loss_per_window` measures what an ablation costs on held-out text.

docs/gpt2/looking-inside.md includes these sections; tests/test_snippets_looking_inside.py
proves them equal to GPT2LMHeadModel and to its hooked copy.
Shapes: B batch, T tokens, C hidden size, H heads, V vocabulary size, L layers.
"""

import torch
import torch.nn.functional as F

from snippets.gpt2_by_hand import block, layer_norm


# --8<-- [start:streams]
def residual_streams(model, input_ids, head_mask=None):
    """The residual stream before block 0 and after each block: L + 1 tensors (B, T, C).

    head_mask: None, or (L, H): row l multiplies the outputs of block l's heads.
    """
    gpt = model.transformer
    positions = torch.arange(input_ids.shape[1], device=input_ids.device)  # (T,)
    x = gpt.wte.weight[input_ids] + gpt.wpe.weight[positions]  # (B, T, C)
    streams = [x]
    for i, layer in enumerate(gpt.h):
        x, _ = block(layer, x, head_mask=None if head_mask is None else head_mask[i])
        streams.append(x)
    return streams


def unembed(model, x):
    """The model's last step on any stream: ln_f, then the tied head. (..., C) -> (..., V)."""
    return layer_norm(x, model.transformer.ln_f) @ model.lm_head.weight.T


# --8<-- [end:streams]


# --8<-- [start:logit_lens]
@torch.no_grad()
def logit_lens(model, input_ids):
    """(1, T) ids -> (L + 1, T, V): row 0 reads the embeddings, row l the stream after
    block l - 1, each through ln_f and the unembedding. The last row is the logits."""
    streams = residual_streams(model, input_ids)  # L + 1 tensors (1, T, C)
    return unembed(model, torch.cat(streams))  # (L + 1, T, C) -> (L + 1, T, V)


# --8<-- [end:logit_lens]


# --8<-- [start:ablate_heads]
@torch.no_grad()
def ablate_heads(model, input_ids, heads):
    """(B, T) ids -> logits (B, T, V) with each (layer, head) in `heads` silenced."""
    head_mask = torch.ones(model.config.n_layer, model.config.n_head)  # (L, H)
    for layer, head in heads:
        head_mask[layer, head] = 0.0
    return unembed(model, residual_streams(model, input_ids, head_mask)[-1])


# --8<-- [end:ablate_heads]


# --8<-- [start:loss_per_window]
@torch.no_grad()
def loss_per_window(model, windows, heads=frozenset()):
    """(N, T + 1) ids -> (N,): the mean next-token loss in nats over each window's T
    predictions, with `heads` ablated."""
    logits = ablate_heads(model, windows[:, :-1], heads)  # (N, T, V)
    losses = F.cross_entropy(logits.transpose(1, 2), windows[:, 1:], reduction="none")  # (N, T)
    return losses.mean(dim=1)


# --8<-- [end:loss_per_window]
