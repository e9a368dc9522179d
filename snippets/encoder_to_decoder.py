"""From encoder to decoder: GPT-2's block built from Part II's modules (snippets/transformer.py).

docs/gpt2/encoder-to-decoder.md includes these sections; tests/test_snippets_encoder_to_decoder.py
proves the layer equal to transformers' GPT2Block, on the book's GPT-2 and at GPT-2's real size.

Shapes: B batch, T tokens, C hidden size, H heads.
"""

from functools import partial

import torch.nn.functional as F

from snippets.transformer import EncoderLayer, causal_mask


# --8<-- [start:decoder_only_layer]
class DecoderOnlyLayer(EncoderLayer):
    """Part II's DecoderLayer without its cross-attention, set as GPT-2 sets it: pre-norm, GELU.

    What is left, masked self-attention then the feed-forward, is the encoder layer's two
    sublayers; what makes it a decoder is the causal mask, which it applies on every call.
    """

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1, eps=1e-5):
        gelu_tanh = partial(F.gelu, approximate="tanh")  # GPT-2's GELU: "gelu_new"
        super().__init__(
            d_model, num_heads, d_ff, dropout, norm_first=True, activation=gelu_tanh, eps=eps
        )

    def forward(self, x):  # (B, T, C) -> (B, T, C)
        return super().forward(x, causal_mask(x.size(1), x.device))  # (T, T) broadcasts


# --8<-- [end:decoder_only_layer]


# --8<-- [start:copy_gpt2_block]
def linear_weights(conv1d):
    """nn.Linear's state dict for a GPT-2 Conv1D, which stores its weight (in, out)."""
    return {"weight": conv1d.weight.T, "bias": conv1d.bias}  # weight (out, in)


def copy_gpt2_block(block):
    """A DecoderOnlyLayer holding a copy of a transformers GPT2Block's weights."""
    C, H = block.ln_1.normalized_shape[0], block.attn.num_heads
    d_ff = block.mlp.c_fc.nf  # 4C
    ours = DecoderOnlyLayer(C, H, d_ff, block.attn.resid_dropout.p, block.ln_1.eps)
    ours.to(block.ln_1.weight)  # the block's dtype and device, before any weight is copied
    # c_attn holds W_q, W_k and W_v side by side: (C, 3C) -> 3 × (C, C), and (3C,) -> 3 × (C,)
    weights = block.attn.c_attn.weight.split(C, dim=1)
    biases = block.attn.c_attn.bias.split(C)
    attention = ours.self_attn
    for proj, weight, bias in zip(
        (attention.q_proj, attention.k_proj, attention.v_proj), weights, biases, strict=True
    ):
        proj.load_state_dict({"weight": weight.T, "bias": bias})  # (C, C): (out, in)
    attention.out_proj.load_state_dict(linear_weights(block.attn.c_proj))
    ours.feed_forward.linear1.load_state_dict(linear_weights(block.mlp.c_fc))  # (4C, C)
    ours.feed_forward.linear2.load_state_dict(linear_weights(block.mlp.c_proj))  # (C, 4C)
    ours.norm1.load_state_dict(block.ln_1.state_dict())  # before the attention
    ours.norm2.load_state_dict(block.ln_2.state_dict())  # before the feed-forward
    return ours


# --8<-- [end:copy_gpt2_block]
