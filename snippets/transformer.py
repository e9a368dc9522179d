"""A Transformer from scratch: the encoder–decoder of "Attention Is All You Need".

Part II of the book includes these sections one by one (docs/transformer/), and
tests/test_snippets_transformer.py proves each module equal to its torch.nn counterpart.

Shapes, everywhere: B batch, T query (target) positions, S key (source) positions,
C = d_model, H heads, D = C // H head size, V vocabulary. In self-attention S = T.

Masks, everywhere: bool, True where query t may attend to key s, as the bool attn_mask of
F.scaled_dot_product_attention, whose name the attention function takes. torch.nn's modules
mean the opposite, True = blocked (attn_mask, key_padding_mask, src_mask, tgt_mask, ...), so
no other module here takes a mask name of its torch.nn counterpart: MultiHeadAttention takes
`mask`, the layers and stacks `self_mask` and `cross_mask` (after the attention that reads
each), the model `src_allowed` and `tgt_allowed` (after what each allows).
"""

# --8<-- [start:model]
# --8<-- [start:imports]
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

# --8<-- [end:imports]


# --8<-- [start:positional_encoding]
def sinusoidal_positional_encoding(seq_len, d_model):
    """PE[pos, 2i] = sin(pos / 10000^(2i / d_model)) and PE[pos, 2i + 1] = cos(same angle)."""
    # float64, so that the angles of far positions keep every digit; float32 at the end
    position = torch.arange(seq_len, dtype=torch.float64).unsqueeze(1)  # (T, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (C/2,): 0, 2, 4, ...
    angle = position / 10000 ** (two_i / d_model)  # (T, C/2): one frequency per column pair
    pe = torch.empty(seq_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)  # even columns
    pe[:, 1::2] = torch.cos(angle)  # odd columns
    return pe.float()  # (T, C)


# --8<-- [end:positional_encoding]


# --8<-- [start:embeddings]
class Embeddings(nn.Module):
    """Token ids to vectors: a row of the embedding table, times √C, plus the position's PE."""

    def __init__(self, vocab_size, d_model, max_len=512, dropout=0.1):
        super().__init__()
        self.token = nn.Embedding(vocab_size, d_model)  # (V, C): one row per token id
        # entries of size 1/√C suit the output projection that shares this table;
        # times √C they are of size 1 on the input side, like the positional encoding
        nn.init.normal_(self.token.weight, std=d_model**-0.5)
        self.scale = math.sqrt(d_model)
        pe = sinusoidal_positional_encoding(max_len, d_model)  # (max_len, C)
        self.register_buffer("position", pe, persistent=False)  # fixed: not a parameter
        self.dropout = nn.Dropout(dropout)

    def forward(self, ids):  # (B, T) -> (B, T, C)
        T = ids.size(1)
        return self.dropout(self.token(ids) * self.scale + self.position[:T])  # (T, C) broadcasts


# --8<-- [end:embeddings]


# --8<-- [start:attention]
def scaled_dot_product_attention(q, k, v, attn_mask=None):
    """softmax(q kᵀ / √D) v, for q (..., T, D), k (..., S, D), v (..., S, D).

    attn_mask: bool, True where query t may attend to key s, broadcastable to (..., T, S),
    as F.scaled_dot_product_attention's bool attn_mask (a float one is not taken here).
    Returns the output (..., T, D) and the attention weights (..., T, S).
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T, S)
    if attn_mask is not None:
        # the lowest finite float: exp(min - max) is exactly 0, and never inf - inf = NaN
        scores = scores.masked_fill(~attn_mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)  # (..., T, S): each row sums to 1
    if attn_mask is not None:
        # a query that may attend to no key at all gets no weights, hence a zero output,
        # not an average over keys it must not see (as F.scaled_dot_product_attention)
        weights = weights.masked_fill(~attn_mask.any(dim=-1, keepdim=True), 0.0)
    return weights @ v, weights  # (..., T, D), (..., T, S)


# --8<-- [end:attention]


# --8<-- [start:masks]
def padding_mask(token_ids, pad_id):
    """True for the keys that are real tokens: (B, 1, 1, S), the same for every head and query."""
    return (token_ids != pad_id)[:, None, None, :]  # (B, S) -> (B, 1, 1, S)


def causal_mask(size, device=None):
    """True on and below the diagonal: query t may attend to keys 0, ..., t and no later."""
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()  # (T, T)


# --8<-- [end:masks]


# --8<-- [start:multi_head_attention]
class MultiHeadAttention(nn.Module):
    """H attentions side by side, each on its own D = C / H columns of the projections."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        assert d_model % num_heads == 0, "d_model must be a multiple of num_heads"
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, query, key, value, mask=None):  # (B, T, C), (B, S, C), (B, S, C)
        # mask: True = may attend, as attn_mask above; nn.MultiheadAttention's attn_mask is
        # True = blocked, so ours goes by another name
        B, T, C = query.shape
        S, H = key.size(1), self.num_heads
        q = self.q_proj(query).view(B, T, H, C // H).transpose(1, 2)  # (B, H, T, D)
        k = self.k_proj(key).view(B, S, H, C // H).transpose(1, 2)  # (B, H, S, D)
        v = self.v_proj(value).view(B, S, H, C // H).transpose(1, 2)  # (B, H, S, D)
        y, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T, D), (B, H, T, S)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, H, D) -> (B, T, C)
        return self.out_proj(y), weights  # (B, T, C), (B, H, T, S)

    @classmethod
    def from_torch(cls, m: nn.MultiheadAttention):
        """A copy of m, which keeps W_q, W_k and W_v stacked in one (3C, C) in_proj_weight."""
        ours = cls(m.embed_dim, m.num_heads).to(m.in_proj_weight)
        projections = (ours.q_proj, ours.k_proj, ours.v_proj)
        weights, biases = m.in_proj_weight.chunk(3), m.in_proj_bias.chunk(3)  # 3 × (C, C), (C,)
        for proj, weight, bias in zip(projections, weights, biases, strict=True):
            proj.load_state_dict({"weight": weight, "bias": bias})
        ours.out_proj.load_state_dict(m.out_proj.state_dict())
        return ours


# --8<-- [end:multi_head_attention]


# --8<-- [start:feed_forward]
class FeedForward(nn.Module):
    """max(0, x W1 + b1) W2 + b2, applied to each position on its own: (B, T, C) -> (B, T, C)."""

    def __init__(self, d_model, d_ff, activation=F.relu):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.activation = activation  # F.relu as in the paper; F.gelu as in BERT and GPT

    def forward(self, x):
        return self.linear2(self.activation(self.linear1(x)))  # (B, T, d_ff) in between


# --8<-- [end:feed_forward]


# --8<-- [start:layer_norm]
class LayerNorm(nn.Module):
    """Normalise each vector over its C features, then scale and shift them, feature by feature."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))  # γ
        self.bias = nn.Parameter(torch.zeros(d_model))  # β
        self.eps = eps

    def forward(self, x):  # (..., C) -> (..., C)
        centred = x - x.mean(dim=-1, keepdim=True)  # (..., C): mean 0
        var = centred.pow(2).mean(dim=-1, keepdim=True)  # (..., 1): divided by C, not C - 1
        return centred / torch.sqrt(var + self.eps) * self.weight + self.bias


# --8<-- [end:layer_norm]


# --8<-- [start:encoder_layer]
class EncoderLayer(nn.Module):
    """Self-attention, then feed-forward; each sublayer inside a residual sum and a LayerNorm."""

    def __init__(
        self, d_model, num_heads, d_ff, dropout=0.1, norm_first=False, activation=F.relu, eps=1e-5
    ):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.feed_forward = FeedForward(d_model, d_ff, activation)
        self.norm1 = LayerNorm(d_model, eps)
        self.norm2 = LayerNorm(d_model, eps)
        self.dropout = nn.Dropout(dropout)  # on each sublayer's output, before the sum
        self.norm_first = norm_first

    def forward(self, x, self_mask=None):  # (B, T, C) -> (B, T, C)
        if self.norm_first:  # pre-norm: x + Sublayer(LayerNorm(x))
            x = x + self._attend(self.norm1(x), self_mask)
            return x + self.dropout(self.feed_forward(self.norm2(x)))
        # post-norm, as in the paper: LayerNorm(x + Sublayer(x))
        x = self.norm1(x + self._attend(x, self_mask))
        return self.norm2(x + self.dropout(self.feed_forward(x)))

    def _attend(self, x, self_mask):
        return self.dropout(self.self_attn(x, x, x, self_mask)[0])

    @classmethod
    def from_torch(cls, m: nn.TransformerEncoderLayer):
        """A copy of m: its weights, norm placement, activation, dropout rate and eps."""
        sizes = (m.linear1.in_features, m.self_attn.num_heads, m.linear1.out_features)
        ours = cls(*sizes, m.dropout.p, m.norm_first, m.activation, m.norm1.eps)
        ours.to(m.linear1.weight)  # m's dtype and device, before any weight is copied
        ours.self_attn = MultiHeadAttention.from_torch(m.self_attn)
        for name in ("linear1", "linear2"):
            getattr(ours.feed_forward, name).load_state_dict(getattr(m, name).state_dict())
        for name in ("norm1", "norm2"):
            getattr(ours, name).load_state_dict(getattr(m, name).state_dict())
        return ours


# --8<-- [end:encoder_layer]


# --8<-- [start:decoder_layer]
class DecoderLayer(nn.Module):
    """Masked self-attention, attention to the encoder's output (memory), then feed-forward."""

    def __init__(
        self, d_model, num_heads, d_ff, dropout=0.1, norm_first=False, activation=F.relu, eps=1e-5
    ):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.feed_forward = FeedForward(d_model, d_ff, activation)
        self.norm1 = LayerNorm(d_model, eps)
        self.norm2 = LayerNorm(d_model, eps)
        self.norm3 = LayerNorm(d_model, eps)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, memory, self_mask=None, cross_mask=None):  # (B, T, C), (B, S, C)
        if self.norm_first:
            x = x + self._self_attend(self.norm1(x), self_mask)
            x = x + self._cross_attend(self.norm2(x), memory, cross_mask)
            return x + self.dropout(self.feed_forward(self.norm3(x)))
        x = self.norm1(x + self._self_attend(x, self_mask))
        x = self.norm2(x + self._cross_attend(x, memory, cross_mask))
        return self.norm3(x + self.dropout(self.feed_forward(x)))  # (B, T, C)

    def _self_attend(self, x, self_mask):  # queries, keys and values: the target so far
        return self.dropout(self.self_attn(x, x, x, self_mask)[0])

    def _cross_attend(self, x, memory, cross_mask):  # queries: the target; keys, values: memory
        return self.dropout(self.cross_attn(x, memory, memory, cross_mask)[0])

    @classmethod
    def from_torch(cls, m: nn.TransformerDecoderLayer):
        """A copy of m; m calls its cross-attention `multihead_attn`."""
        sizes = (m.linear1.in_features, m.self_attn.num_heads, m.linear1.out_features)
        ours = cls(*sizes, m.dropout.p, m.norm_first, m.activation, m.norm1.eps)
        ours.to(m.linear1.weight)  # m's dtype and device, before any weight is copied
        ours.self_attn = MultiHeadAttention.from_torch(m.self_attn)
        ours.cross_attn = MultiHeadAttention.from_torch(m.multihead_attn)
        for name in ("linear1", "linear2"):
            getattr(ours.feed_forward, name).load_state_dict(getattr(m, name).state_dict())
        for name in ("norm1", "norm2", "norm3"):
            getattr(ours, name).load_state_dict(getattr(m, name).state_dict())
        return ours


# --8<-- [end:decoder_layer]


# --8<-- [start:config]
@dataclass
class TransformerConfig:
    vocab_size: int = 37000  # the paper's BPE vocabulary, shared by English and German
    d_model: int = 512  # C: the width of every vector between the sublayers
    num_heads: int = 8  # H: each head works on D = d_model / num_heads = 64 features
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    d_ff: int = 2048  # the feed-forward's hidden width, 4 × d_model
    dropout: float = 0.1  # on the embeddings and on each sublayer's output
    norm_first: bool = False  # False: post-norm, as in the paper; True: pre-norm
    activation: Callable = F.relu  # the feed-forward's; F.gelu for the GELU variant
    eps: float = 1e-5  # LayerNorm's epsilon, as nn.LayerNorm's
    max_len: int = 512  # the longest sequence the positional-encoding table covers
    pad_id: int = 0  # the token id that fills short sequences to the batch's length


# --8<-- [end:config]


# --8<-- [start:stacks]
class Encoder(nn.Module):
    """N encoder layers, then a LayerNorm, as nn.TransformerEncoder in nn.Transformer."""

    def __init__(self, c: TransformerConfig):
        super().__init__()
        args = (c.d_model, c.num_heads, c.d_ff, c.dropout, c.norm_first, c.activation, c.eps)
        self.layers = nn.ModuleList(EncoderLayer(*args) for _ in range(c.num_encoder_layers))
        self.norm = LayerNorm(c.d_model, c.eps)

    def forward(self, x, self_mask=None):  # (B, S, C) -> (B, S, C)
        for layer in self.layers:
            x = layer(x, self_mask)
        return self.norm(x)


class Decoder(nn.Module):
    """N decoder layers, each reading the same memory, then a LayerNorm."""

    def __init__(self, c: TransformerConfig):
        super().__init__()
        args = (c.d_model, c.num_heads, c.d_ff, c.dropout, c.norm_first, c.activation, c.eps)
        self.layers = nn.ModuleList(DecoderLayer(*args) for _ in range(c.num_decoder_layers))
        self.norm = LayerNorm(c.d_model, c.eps)

    def forward(self, x, memory, self_mask=None, cross_mask=None):  # (B, T, C), (B, S, C)
        for layer in self.layers:
            x = layer(x, memory, self_mask, cross_mask)
        return self.norm(x)  # (B, T, C)


# --8<-- [end:stacks]


# --8<-- [start:transformer]
class Transformer(nn.Module):
    """Source ids and target ids in, next-token logits out: (B, S), (B, T) -> (B, T, V)."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        # one table for source tokens, target tokens and the output projection, as in the paper
        self.embed = Embeddings(config.vocab_size, config.d_model, config.max_len, config.dropout)
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)

    def encode(self, src, src_allowed):  # (B, S) -> memory (B, S, C)
        return self.encoder(self.embed(src), src_allowed)

    def decode(self, tgt, memory, tgt_allowed, src_allowed):  # (B, T), (B, S, C) -> (B, T, V)
        x = self.decoder(self.embed(tgt), memory, tgt_allowed, src_allowed)  # (B, T, C)
        return F.linear(x, self.embed.token.weight)  # (B, T, C) @ (C, V): a score per token

    def forward(self, src, tgt):
        pad_id, T = self.config.pad_id, tgt.size(1)
        src_allowed = padding_mask(src, pad_id)  # (B, 1, 1, S): the real source tokens
        tgt_allowed = padding_mask(tgt, pad_id) & causal_mask(T, tgt.device)  # (B, 1, T, T)
        memory = self.encode(src, src_allowed)  # (B, S, C)
        return self.decode(tgt, memory, tgt_allowed, src_allowed)  # (B, T, V)

    @classmethod
    def from_torch(cls, m: nn.Transformer, **config):
        """Ours, with m's encoder and decoder stacks. nn.Transformer has no embeddings: ours
        keep their initialisation, and `config` sets the rest (vocab_size, max_len, pad_id)."""
        first = m.encoder.layers[0]
        ours = cls(
            TransformerConfig(
                d_model=m.d_model,
                num_heads=m.nhead,
                d_ff=first.linear1.out_features,
                num_encoder_layers=len(m.encoder.layers),
                num_decoder_layers=len(m.decoder.layers),
                dropout=first.dropout.p,
                norm_first=first.norm_first,
                activation=first.activation,
                eps=first.norm1.eps,
                **config,
            )
        ).to(first.linear1.weight)
        ours.encoder.layers = nn.ModuleList(EncoderLayer.from_torch(x) for x in m.encoder.layers)
        ours.decoder.layers = nn.ModuleList(DecoderLayer.from_torch(x) for x in m.decoder.layers)
        ours.encoder.norm.load_state_dict(m.encoder.norm.state_dict())
        ours.decoder.norm.load_state_dict(m.decoder.norm.state_dict())
        return ours


# --8<-- [end:transformer]
# --8<-- [end:model]


# Measurements the chapters make on the modules above.


# --8<-- [start:per_layer_statistics]
def per_layer_statistics(layers, x):
    """Each layer's output size (RMS) and the norm of its parameters' gradient, at x.

    The gradient is that of a fixed random readout of the normalised final output,
    the same for every stack, so that stacks differing only in their norms compare.
    """
    rms = []
    for layer in layers:
        x = layer(x)  # (B, T, C)
        rms.append(x.pow(2).mean().sqrt().item())
    # drawn on the CPU, so that it is the same numbers on every device
    readout = torch.randn(x.shape, generator=torch.Generator().manual_seed(0)).to(x)
    (F.layer_norm(x, x.shape[-1:]) * readout).sum().backward()
    grads = [
        torch.cat([p.grad.flatten() for p in layer.parameters()]).norm().item() for layer in layers
    ]
    return rms, grads


# --8<-- [end:per_layer_statistics]


# --8<-- [start:detached_stream]
class ReadsADetachedStream(EncoderLayer):
    """A pre-norm layer whose sublayers read a detached copy of the stream.

    The forward pass is unchanged; the gradient reaches the layers below through the
    residual additions only, not through the sublayers that read their output.
    """

    def forward(self, x, self_mask=None):  # (B, T, C) -> (B, T, C)
        x = x + self._attend(self.norm1(x.detach()), self_mask)
        return x + self.dropout(self.feed_forward(self.norm2(x.detach())))


def spread(values):
    """The largest distance from the mean, as a fraction of the mean."""
    mean = sum(values) / len(values)
    return max(abs(v - mean) for v in values) / mean


# --8<-- [end:detached_stream]
