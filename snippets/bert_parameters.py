"""Where a BertModel's parameters are: counted from its config, and from its modules.

The model chapter (docs/bert/model.md) includes both functions and checks them
against each other; its figure draws the second.
"""


# --8<-- [start:formula]
def parameters_by_formula(config):
    V, P, S = config.vocab_size, config.max_position_embeddings, config.type_vocab_size
    C, L = config.hidden_size, config.num_hidden_layers
    I = config.intermediate_size  # noqa: E741 (the shape legend's letter)
    return {
        "word embeddings": V * C,
        "position and token type embeddings": (P + S) * C,
        "LayerNorms": 2 * C * (1 + 2 * L),  # one after the embeddings, two in each layer
        "self-attention: Q, K, V": L * 3 * (C * C + C),
        "attention output projection": L * (C * C + C),
        "feed-forward": L * ((C * I + I) + (I * C + C)),  # widen to I, narrow back to C
        "pooler": C * C + C,
    }


# --8<-- [end:formula]


# --8<-- [start:modules]
def count(*modules):
    return sum(p.numel() for module in modules for p in module.parameters())


def parameters_by_module(model):
    embeddings, layers = model.embeddings, model.encoder.layer
    return {
        "word embeddings": count(embeddings.word_embeddings),
        "position and token type embeddings": count(
            embeddings.position_embeddings, embeddings.token_type_embeddings
        ),
        "LayerNorms": count(
            embeddings.LayerNorm,
            *[layer.attention.output.LayerNorm for layer in layers],
            *[layer.output.LayerNorm for layer in layers],
        ),
        "self-attention: Q, K, V": count(*[layer.attention.self for layer in layers]),
        "attention output projection": count(*[layer.attention.output.dense for layer in layers]),
        "feed-forward": count(
            *[layer.intermediate for layer in layers], *[layer.output.dense for layer in layers]
        ),
        "pooler": count(model.pooler),
    }


# --8<-- [end:modules]
