"""The figures of docs/assistant/grpo.md."""

import matplotlib.pyplot as plt
import torch

from snippets.figures import figure
from snippets.grpo import layer_norm


@figure("assistant-grpo.svg", inputs=("snippets/grpo.py",))
def tokens_before_and_after_layer_norm():
    torch.manual_seed(0)
    x = 1 + 3 * torch.randn(5, 8)  # (T, C)
    shown = {"before": x, "after LayerNorm": layer_norm(x)}
    fig, axes = plt.subplots(1, len(shown), figsize=(6.5, 2.4), sharey=True)
    for ax, (title, tokens) in zip(axes, shown.items(), strict=True):
        for t, token in enumerate(tokens):
            ax.plot([t] * len(token), token, "o", color="#3f51b5", alpha=0.6, markersize=4)
        ax.set_title(title)
        ax.set_xlabel("token")
        ax.set_xticks(range(len(tokens)))
    axes[0].set_ylabel("its 8 features")
    return fig
