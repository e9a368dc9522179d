"""BERT's forward pass by hand: torch operations on a BertModel's own parameters.

No submodule of the model is called; every step reads weights and does the
arithmetic itself. The chapters of Part I (docs/bert/) include this file section
by section, and tests/test_snippets_bert_by_hand.py proves `forward` equal to
transformers' BertModel, eager attention, on inputs the chapters do not show.

Shapes: B batch, T tokens, C hidden size, H heads, D = C / H head size,
I intermediate size, L layers.
"""

import math
from dataclasses import dataclass

import torch


# --8<-- [start:layer_norm]
def layer_norm(x, norm):
    """Normalize each C-vector to mean 0 and variance 1, then scale and shift it."""
    mean = x.mean(dim=-1, keepdim=True)
    variance = x.var(dim=-1, keepdim=True, correction=0)  # the biased variance, as nn.LayerNorm
    return (x - mean) / torch.sqrt(variance + norm.eps) * norm.weight + norm.bias


# --8<-- [end:layer_norm]


# --8<-- [start:embed]
def embed(embeddings, input_ids, token_type_ids):
    """(B, T) ids -> (B, T, C): word + token type + position, then LayerNorm.

    `embeddings` is `model.embeddings`. Its dropout is the identity in eval mode.
    """
    T = input_ids.shape[1]
    words = embeddings.word_embeddings.weight[input_ids]  # (B, T, C)
    token_types = embeddings.token_type_embeddings.weight[token_type_ids]  # (B, T, C)
    positions = embeddings.position_embeddings.weight[:T]  # (T, C), the same for every row
    return layer_norm(words + token_types + positions, embeddings.LayerNorm)


# --8<-- [end:embed]


# --8<-- [start:heads]
def linear(x, dense):
    """What an nn.Linear computes: x Wᵀ + b."""
    return x @ dense.weight.T + dense.bias


def split_heads(x, H):
    """(B, T, C) -> (B, H, T, D): each head gets its own D-wide slice of C."""
    B, T, C = x.shape
    return x.view(B, T, H, C // H).transpose(1, 2)  # (B, H, T, D)


def merge_heads(x):
    """(B, H, T, D) -> (B, T, C): the heads' slices side by side again."""
    B, H, T, D = x.shape
    return x.transpose(1, 2).reshape(B, T, H * D)  # (B, T, C)


# --8<-- [end:heads]


# --8<-- [start:additive_padding_mask]
def additive_padding_mask(attention_mask, dtype):
    """attention_mask (B, T), 1 for a token and 0 for padding -> an additive mask (B, 1, 1, T).

    Added to the scores: 0 where a key may be attended to; the most negative number of
    `dtype` where it is padding, so that softmax gives it a weight of exactly 0. Broadcast
    over heads and queries: every query of a sequence ignores the same keys.
    """
    is_padding = attention_mask[:, None, None, :] == 0  # (B, 1, 1, T)
    zeros = torch.zeros(is_padding.shape, dtype=dtype, device=is_padding.device)
    return zeros.masked_fill(is_padding, torch.finfo(dtype).min)


# --8<-- [end:additive_padding_mask]


# --8<-- [start:self_attention]
def self_attention(attention, x, additive_mask, H):
    """x (B, T, C) -> context (B, T, C) and attention probabilities (B, H, T, T).

    `attention` is `layer.attention.self`; `additive_mask` (B, 1, 1, T) comes from
    `additive_padding_mask`. The dropout on the probabilities is the identity in eval mode.
    """
    q = split_heads(linear(x, attention.query), H)  # (B, H, T, D)
    k = split_heads(linear(x, attention.key), H)  # (B, H, T, D)
    v = split_heads(linear(x, attention.value), H)  # (B, H, T, D)
    D = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # (B, H, T, T): query rows, key columns
    probabilities = torch.softmax(scores + additive_mask, dim=-1)  # (B, H, T, T): rows sum to 1
    context = merge_heads(probabilities @ v)  # (B, T, C)
    return context, probabilities


# --8<-- [end:self_attention]


# --8<-- [start:attention_output]
def attention_output(output, context, x):
    """Project the context, add the attention's input x back, LayerNorm. (B, T, C) throughout.

    `output` is `layer.attention.output`. Its dropout is the identity in eval mode.
    """
    return layer_norm(x + linear(context, output.dense), output.LayerNorm)


# --8<-- [end:attention_output]


# --8<-- [start:gelu]
def gelu(x):
    """BERT's GELU, x·Φ(x), with the exact normal CDF Φ written through erf."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    """The tanh approximation of GELU (GPT-2's); not what BERT computes."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


# config.hidden_act -> the function; the names are transformers' own
ACTIVATIONS = {
    "gelu": gelu,
    "gelu_new": gelu_tanh,
    "gelu_pytorch_tanh": gelu_tanh,
    "relu": torch.relu,
}


# --8<-- [end:gelu]


# --8<-- [start:feed_forward]
def feed_forward(layer, h, activation=gelu):
    """h (B, T, C) -> (B, T, C): widen to I, activate, narrow to C, add h back, LayerNorm.

    `layer` is one `model.encoder.layer[i]`; `h` is its attention output.
    """
    widened = activation(linear(h, layer.intermediate.dense))  # (B, T, I)
    narrowed = linear(widened, layer.output.dense)  # (B, T, C); dropout: identity in eval
    return layer_norm(h + narrowed, layer.output.LayerNorm)


# --8<-- [end:feed_forward]


# --8<-- [start:layer]
def bert_layer(layer, x, additive_mask, config):
    """One encoder layer: (B, T, C) -> (B, T, C), and its attention probabilities."""
    context, probabilities = self_attention(
        layer.attention.self, x, additive_mask, config.num_attention_heads
    )
    h = attention_output(layer.attention.output, context, x)
    return feed_forward(layer, h, ACTIVATIONS[config.hidden_act]), probabilities


# --8<-- [end:layer]


# --8<-- [start:encode]
def encode(model, x, additive_mask):
    """Run the embeddings x (B, T, C) through every layer, each with the same additive_mask.

    Returns L + 1 hidden states (the input first, then each layer's output) and
    L attention probabilities, one (B, H, T, T) per layer.
    """
    hidden_states, attentions = [x], []
    for layer in model.encoder.layer:
        x, probabilities = bert_layer(layer, x, additive_mask, model.config)
        hidden_states.append(x)
        attentions.append(probabilities)
    return tuple(hidden_states), tuple(attentions)


# --8<-- [end:encode]


# --8<-- [start:pool]
def pool(pooler, last_hidden_state):
    """(B, T, C) -> (B, C): dense and tanh on the [CLS] vector, and nothing else."""
    return torch.tanh(linear(last_hidden_state[:, 0], pooler.dense))  # (B, C)


# --8<-- [end:pool]


# --8<-- [start:forward]
@dataclass
class BertByHandOutput:
    last_hidden_state: torch.Tensor  # (B, T, C)
    pooler_output: torch.Tensor | None  # (B, C); None for a BertModel built without a pooler
    hidden_states: tuple[torch.Tensor, ...]  # L + 1 of (B, T, C): embeddings, then each layer
    attentions: tuple[torch.Tensor, ...]  # L of (B, H, T, T)


def forward(model, input_ids, attention_mask=None, token_type_ids=None):
    """BertModel's forward pass, by hand, for a model in eval mode."""
    if model.training:
        raise ValueError("dropout is not reproduced here: call model.eval() first")
    if model.config.is_decoder:
        raise ValueError("a decoder BertModel masks causally, which this encoder does not")
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)  # every token is real
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(input_ids)  # everything is the first sentence
    x = embed(model.embeddings, input_ids, token_type_ids)  # (B, T, C)
    additive_mask = additive_padding_mask(attention_mask, x.dtype)  # (B, 1, 1, T)
    hidden_states, attentions = encode(model, x, additive_mask)
    last_hidden_state = hidden_states[-1]
    pooled = pool(model.pooler, last_hidden_state) if model.pooler is not None else None
    return BertByHandOutput(last_hidden_state, pooled, hidden_states, attentions)


# --8<-- [end:forward]
