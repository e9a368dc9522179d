"""Figures of docs/bert/self-attention.md: layer 0's self-attention, its heads, and padding."""

import matplotlib.pyplot as plt
import torch
from matplotlib.colors import PowerNorm

from snippets.figures import figure
from snippets.figures._flow import Node, draw_flow, module_node
from snippets.figures._minilm import (
    attention_sentence_outputs,
    minilm,
    recorded_minilm,
    tokenizer,
)


def heads_shape(calls, name):
    """(B, H, T, D): a (B, T, C) tensor once split into heads; H from the recorded probabilities."""
    B, T, C = calls[f"{name}.query"].outputs[0]
    H = calls[name].outputs[1][1]
    return (B, H, T, C // H)


@figure("self-attention-flow.svg")
def self_attention_flow():
    calls, sizes, shape = recorded_minilm()
    root = "encoder.layer.0.attention.self"
    attention = calls[root]
    split = shape(heads_shape(calls, root))
    nodes = {
        "x": Node(2.9, 7.6, "hidden_states[0]", "tensor"),
        "q": module_node(0, 6.6, calls, f"{root}.query", "encoder.layer.0.attention."),
        "k": module_node(2.9, 6.6, calls, f"{root}.key", "encoder.layer.0.attention."),
        "v": module_node(5.8, 6.6, calls, f"{root}.value", "encoder.layer.0.attention."),
        "q_heads": Node(0, 5.3, "split heads\nview, transpose", "op"),
        "k_heads": Node(2.9, 5.3, "split heads\nview, transpose", "op"),
        "v_heads": Node(5.8, 5.3, "split heads\nview, transpose", "op"),
        "scores": Node(1.45, 4.0, "Q Kᵀ / √D", "op"),
        "mask": Node(1.45, 2.9, "+ padding mask", "op"),
        "attention_mask": Node(-1.6, 2.9, "mask, from\nattention_mask", "tensor"),
        "softmax": Node(1.45, 1.8, "softmax over keys", "op"),
        "mix": Node(4.2, 1.1, "probabilities @ V", "op"),
        "merge": Node(4.2, 0.0, "merge heads\ntranspose, reshape", "op"),
        "out": Node(4.2, -1.0, "context → attention.output", "tensor"),
    }
    probabilities = shape(attention.outputs[1])
    edges = [
        ("x", "q", shape(calls[f"{root}.query"].inputs[0])),
        ("x", "k", ""),
        ("x", "v", ""),
        ("q", "q_heads", shape(calls[f"{root}.query"].outputs[0])),
        ("k", "k_heads", shape(calls[f"{root}.key"].outputs[0])),
        ("v", "v_heads", shape(calls[f"{root}.value"].outputs[0])),
        ("q_heads", "scores", split),
        ("k_heads", "scores", split),
        ("scores", "mask", probabilities),
        ("attention_mask", "mask", shape(attention.inputs[1])),
        ("mask", "softmax", probabilities),
        ("softmax", "mix", probabilities + "\n= attentions[0]"),
        ("v_heads", "mix", split),
        ("mix", "merge", split),
        ("merge", "out", shape(attention.outputs[0])),
    ]
    return draw_flow(nodes, edges, f"model.{root}", sizes)


@figure("self-attention-heads.svg")
def attention_heads():
    tokens, outputs = attention_sentence_outputs()
    probabilities = outputs.attentions[0][0]  # layer 0: (H, T, T)
    H = probabilities.shape[0]
    # three heads a row, at about the width of the page, so that the token labels print at
    # the size of the text around them
    fig, axes = plt.subplots(
        H // 3, 3, figsize=(9.5, 13.5), sharex=True, sharey=True, layout="constrained"
    )
    scale = PowerNorm(gamma=0.5, vmin=0, vmax=1)  # square root: spread-out heads stay visible
    for head, ax in enumerate(axes.flat):
        image = ax.imshow(probabilities[head].numpy(), cmap="Blues", norm=scale)
        ax.set_title(f"head {head}", fontsize=10)
        ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=9)
        ax.set_yticks(range(len(tokens)), tokens, fontsize=9)
        ax.tick_params(length=0)
    fig.supxlabel("key: the token attended to", fontsize=9)
    fig.supylabel("query: the token attending", fontsize=9)
    fig.colorbar(image, ax=axes, shrink=0.4, label="attention probability (square-root scale)")
    return fig


@figure("self-attention-padding.svg")
def attention_padding():
    model = minilm()
    short, long = "The cat sat.", "Transformers read every word of a sentence at once."
    alone = tokenizer()(short, return_tensors="pt")
    padded = tokenizer()([short, long], padding=True, return_tensors="pt")
    layer, head = 0, 0
    with torch.no_grad():
        p_alone = model(**alone, output_attentions=True).attentions[layer][0, head]
        p_padded = model(**padded, output_attentions=True).attentions[layer][0, head]
    T_real = p_alone.shape[0]
    tokens = padded.tokens(0)
    fig, axes = plt.subplots(
        1, 3, figsize=(11.5, 4.4), width_ratios=[12, 6, 6], layout="constrained"
    )
    panels = [
        (p_padded, tokens, tokens, "in a padded batch: [PAD] keys get 0"),
        (p_alone, tokens[:T_real], tokens[:T_real], "alone: no padding"),
    ]
    for ax, (probabilities, rows, columns, title) in zip(axes, panels, strict=False):
        image = ax.imshow(probabilities.numpy(), cmap="Blues", vmin=0, vmax=1)
        ax.set_xticks(range(len(columns)), columns, rotation=90, fontsize=7.5)
        ax.set_yticks(range(len(rows)), rows, fontsize=7.5)
        ax.set_title(title, fontsize=9.5)
    fig.colorbar(image, ax=axes[:2], shrink=0.8, label="probability")
    difference = (p_padded[:T_real, :T_real] - p_alone).abs()
    shown = axes[2].imshow(difference.numpy(), cmap="Oranges", vmin=0)
    axes[2].set_xticks(range(T_real), tokens[:T_real], rotation=90, fontsize=7.5)
    axes[2].set_yticks(range(T_real), tokens[:T_real], fontsize=7.5)
    axes[2].set_title(
        f"|padded − alone|, real tokens\nlargest: {difference.max():.1e}", fontsize=9.5
    )
    fig.colorbar(shown, ax=axes[2], shrink=0.8, format="%.1e")
    fig.suptitle(f"layer {layer}, head {head}: rows are queries, columns keys", fontsize=10)
    return fig
