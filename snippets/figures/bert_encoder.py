"""Figures of docs/bert/encoder.md: a layer's flow, the encoder's, and what each layer changes."""

import itertools
from functools import cache

import matplotlib.pyplot as plt
import numpy as np
import torch

from snippets.figures import figure
from snippets.figures._flow import Node, draw_flow, module_node
from snippets.figures._minilm import minilm, recorded_minilm, tokenizer

# the encoder chapter's measurement: "bank" at the same position in every sentence
RIVER_BANK = [
    "we sat on the bank of the river and watched the water.",
    "they walked along the bank of the stream at dawn.",
    "ducks rested on the bank near the muddy lake.",
]
MONEY_BANK = [
    "she paid into the bank account every month.",
    "he borrowed from the bank to buy a house.",
    "we waited inside the bank to cash a cheque.",
]


@figure("encoder-layer-flow.svg")
def layer_flow():
    calls, sizes, shape = recorded_minilm()
    root = "encoder.layer.0."
    columns = [
        (
            0.0,
            "hidden_states[0]",
            [
                "attention.self",
                "attention.output.dense",
                "attention.output.dropout",
                "+",
                "attention.output.LayerNorm",
            ],
            "attention output",
        ),
        (
            4.4,
            "attention output",
            [
                "intermediate.dense",
                "intermediate.intermediate_act_fn",
                "output.dense",
                "output.dropout",
                "+",
                "output.LayerNorm",
            ],
            "hidden_states[1]",
        ),
    ]
    nodes, edges = {}, []
    for x, first, names, last in columns:
        keys = [f"{x} in"]
        nodes[keys[0]] = Node(x, 0.95 * 7, first, "tensor")
        for row, name in enumerate(names, start=1):
            key = f"{x} {name}"
            y = 0.95 * (7 - row)
            nodes[key] = (
                Node(x, y, "+", "op")
                if name == "+"
                else module_node(x, y, calls, root + name, root)
            )
            keys.append(key)
        keys.append(f"{x} out")
        nodes[keys[-1]] = Node(x, 0.95 * (6 - len(names)), last, "tensor")
        for a, b in itertools.pairwise(keys):
            module_a, module_b = a.split(" ", 1)[1], b.split(" ", 1)[1]
            if module_a in names and module_a != "+":
                label = shape(calls[root + module_a].outputs[0])
            elif module_b in names and module_b != "+":
                label = shape(calls[root + module_b].inputs[0])
            else:
                label = ""
            edges.append((a, b, label))
        edges.append((keys[0], f"{x} +", "residual"))
    attention = calls[root + "attention.self"]
    nodes["attentions"] = Node(2.6, nodes["0.0 attention.self"].y, "attentions[0]", "tensor")
    edges.append(("0.0 attention.self", "attentions", shape(attention.outputs[1])))
    return draw_flow(nodes, edges, f"model.{root.rstrip('.')}: attention, then feed-forward", sizes)


@figure("encoder-flow.svg")
def encoder_flow():
    calls, sizes, shape = recorded_minilm()
    layers = [f"encoder.layer.{i}" for i in range(minilm().config.num_hidden_layers)]
    chain = ["embeddings", *layers, "pooler"]
    step = 1.2  # room for three lines of label between boxes
    nodes = {"ids": Node(0, step * (len(chain) + 1), "input_ids", "tensor")}
    for row, name in enumerate(chain, start=1):
        nodes[name] = module_node(0, step * (len(chain) + 1 - row), calls, name)
    nodes["out"] = Node(0, 0, "pooler_output", "tensor")
    keys = list(nodes)
    edges = [("ids", "embeddings", shape(calls["embeddings"].inputs[0]))]
    for i, (a, b) in enumerate(itertools.pairwise(keys[1:])):
        # what comes out of the embeddings, then of each layer: hidden_states[0 ... L]
        if b == "out":
            edges.append((a, b, shape(calls[a].outputs[0])))
            continue
        named = f"hidden_states[{i}]" + (" = last_hidden_state" if b == "pooler" else "")
        edges.append((a, b, f"{named}\n{shape(calls[a].outputs[0])}"))
    for i, name in enumerate(layers):
        nodes[f"attentions {i}"] = Node(3.1, nodes[name].y, f"attentions[{i}]", "tensor")
        probabilities = calls[f"{name}.attention.self"].outputs[1]
        edges.append((name, f"attentions {i}", shape(probabilities).split("\n")[0]))
    title = "model: the output of encoder.layer.i is hidden_states[i + 1]"
    return draw_flow(nodes, edges, title, sizes)


@cache
def bank_outputs():
    """The encoder chapter's batch: its hidden states, padding, and where "bank" is."""
    batch = tokenizer()(RIVER_BANK + MONEY_BANK, padding=True, return_tensors="pt")
    bank = tokenizer().convert_tokens_to_ids("bank")
    positions = [row.tolist().index(bank) for row in batch["input_ids"]]
    with torch.no_grad():
        hidden_states = minilm()(**batch, output_hidden_states=True).hidden_states
    return torch.stack(hidden_states), batch["attention_mask"].bool(), positions


@figure("encoder-layers.svg")
def what_layers_change():
    hidden, real, positions = bank_outputs()  # (L + 1, B, T, C), (B, T), B positions
    cosine = torch.nn.functional.cosine_similarity
    moved = [cosine(hidden[i], hidden[i + 1], dim=-1)[real] for i in range(len(hidden) - 1)]
    vectors = torch.nn.functional.normalize(
        hidden[:, torch.arange(len(positions)), positions], dim=-1
    )
    similarity = vectors @ vectors.transpose(1, 2)  # (L + 1, 6, 6)
    n = len(RIVER_BANK)
    off_diagonal = ~torch.eye(n, dtype=torch.bool)
    same = torch.cat(
        [similarity[:, :n, :n][:, off_diagonal], similarity[:, n:, n:][:, off_diagonal]], dim=1
    ).mean(1)
    across = similarity[:, :n, n:].mean((1, 2))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 3.6))
    L = len(moved)
    jitter = np.random.default_rng(0).uniform(-0.15, 0.15, len(moved[0]))
    for layer, similarities in enumerate(moved):
        left.scatter(layer + jitter, similarities, s=8, color="#3f51b5", alpha=0.35, lw=0)
    means = [m.mean() for m in moved]
    left.plot(range(L), means, color="#e65100", marker="o", label="mean over real tokens")
    left.set_xlabel("encoder.layer[i]: hidden_states[i] → hidden_states[i + 1]")
    left.set_ylabel("cosine(before, after)")
    left.set_title("how far each token's vector turns in each layer", loc="left", fontsize=9.5)
    left.legend(fontsize=8, frameon=False, loc="lower left")
    indices = range(L + 1)
    right.plot(
        indices, same, marker="o", color="#3f51b5", label="same sense (river–river, money–money)"
    )
    right.plot(indices, across, marker="o", color="#e65100", label="different senses (river–money)")
    right.set_xlabel("hidden_states[i]")
    right.set_ylabel("mean cosine between the two 'bank's")
    right.set_title("'bank' in six sentences, after each layer", loc="left", fontsize=9.5)
    right.legend(fontsize=8, frameon=False, loc="lower left")
    left.set_xticks(range(L))
    right.set_xticks(range(L + 1))
    fig.tight_layout()
    return fig
