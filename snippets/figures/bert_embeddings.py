"""Figures of docs/bert/embeddings.md: model.embeddings' flow, and what each table adds."""

import matplotlib.pyplot as plt
import numpy as np

from snippets.figures import figure
from snippets.figures._flow import Node, draw_flow, module_node
from snippets.figures._minilm import ANSWERS, QUESTIONS, minilm, recorded_minilm, tokenizer


@figure("embeddings-flow.svg")
def embeddings_flow():
    calls, sizes, shape = recorded_minilm()
    nodes = {
        "ids": Node(0, 5.2, "input_ids", "tensor"),
        "types": Node(2.9, 5.2, "token_type_ids", "tensor"),
        "positions": Node(5.8, 5.2, "position_ids", "tensor"),
        "word": module_node(0, 4.1, calls, "embeddings.word_embeddings"),
        "type": module_node(2.9, 4.1, calls, "embeddings.token_type_embeddings"),
        "position": module_node(5.8, 4.1, calls, "embeddings.position_embeddings"),
        "sum": Node(2.9, 2.75, "word + token type + position", "op"),
        "norm": module_node(2.9, 1.85, calls, "embeddings.LayerNorm"),
        "dropout": module_node(2.9, 0.85, calls, "embeddings.dropout"),
        "out": Node(2.9, 0, "hidden_states[0]", "tensor"),
    }
    word, token_type, position = (
        calls[f"embeddings.{n}_embeddings"] for n in ("word", "token_type", "position")
    )
    edges = [
        ("ids", "word", shape(word.inputs[0])),
        ("types", "type", shape(token_type.inputs[0])),
        ("positions", "position", shape(position.inputs[0])),
        ("word", "sum", shape(word.outputs[0])),
        ("type", "sum", shape(token_type.outputs[0])),
        ("position", "sum", shape(position.outputs[0])),
        ("sum", "norm", shape(calls["embeddings.LayerNorm"].inputs[0])),
        ("norm", "dropout", shape(calls["embeddings.LayerNorm"].outputs[0])),
        ("dropout", "out", shape(calls["embeddings.dropout"].outputs[0])),
    ]
    return draw_flow(
        nodes, edges, "model.embeddings, on the tokenizer chapter's batch of pairs", sizes
    )


@figure("embeddings-contributions.svg")
def embedding_contributions():
    model = minilm()
    batch = tokenizer()(QUESTIONS[0], ANSWERS[0], return_tensors="pt")
    tables = model.embeddings
    T = batch["input_ids"].shape[1]
    parts = {
        "word": tables.word_embeddings.weight[batch["input_ids"][0]],
        "position": tables.position_embeddings.weight[:T],
        "token type": tables.token_type_embeddings.weight[batch["token_type_ids"][0]],
    }
    total = sum(parts.values())
    # each part's projection on the sum, as a share of the sum's squared length: they add to 1
    shares = {
        name: ((part * total).sum(-1) / (total * total).sum(-1)).detach().numpy()
        for name, part in parts.items()
    }
    assert all((share > 0).all() for share in shares.values()), "a negative share would not stack"
    tokens = batch.tokens()
    fig, ax = plt.subplots(figsize=(8.4, 3.0))
    bottom = np.zeros(T)
    for (name, share), colour in zip(
        shares.items(), ["#3f51b5", "#ff8a65", "#00897b"], strict=True
    ):
        ax.bar(range(T), share, bottom=bottom, color=colour, label=name, width=0.75)
        bottom += share
    ax.set_xticks(range(T), tokens, fontsize=8.5)
    ax.set_ylabel("share of the sum")
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8.5, frameon=False)
    ax.set_title(
        "what each of the three embeddings adds to each token's vector, before LayerNorm",
        loc="left",
        fontsize=9.5,
    )
    return fig
