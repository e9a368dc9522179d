"""Figures of docs/gpt2/forward.md: every head's attention on a line of the held-out play."""

import matplotlib.pyplot as plt

from snippets.figures import figure
from snippets.figures._gpt2 import WEIGHTS, shipped_model

LINE = "Full fathom five thy father lies"  # a line of the held-out play


@figure("gpt2-forward-attention.svg", inputs=(WEIGHTS,))
def forward_attention():
    import torch

    model, tokenizer = shipped_model(attn_implementation="eager")
    ids = tokenizer(LINE, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        attentions = model(ids, output_attentions=True).attentions  # L × (1, H, T, T)
    tokens = [t.replace("Ġ", "·") for t in tokenizer.convert_ids_to_tokens(ids[0])]
    layers, heads = len(attentions), attentions[0].shape[1]
    fig, axes = plt.subplots(layers, heads, figsize=(2.1 * heads, 2.1 * layers))
    for layer, row in enumerate(axes):
        for head, ax in enumerate(row):
            ax.imshow(attentions[layer][0, head].numpy(), cmap="Blues", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            if layer == 0:
                ax.set_title(f"head {head}", fontsize=9)
            if head == 0:
                ax.set_ylabel(f"layer {layer}", fontsize=9)
    for ax in axes[-1]:
        ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=6.5)
    for ax in axes[:, 0]:
        ax.set_yticks(range(len(tokens)), tokens, fontsize=6.5)
    fig.supxlabel("key (the token read)", fontsize=9)
    fig.supylabel("query (the token reading)", fontsize=9)
    fig.tight_layout()
    return fig
