"""Figures of docs/transformer/layers.md: post-norm against pre-norm over 12 layers."""

import matplotlib.pyplot as plt
import numpy as np
import torch

from snippets.figures import figure

TRANSFORMER = "snippets/transformer.py"  # the code these figures draw from


@figure("layers-pre-post-norm.svg", inputs=(TRANSFORMER,))
def pre_post_norm():
    import copy

    from torch import nn

    from snippets.transformer import EncoderLayer, ReadsADetachedStream, per_layer_statistics

    # the chapter's measurement: 12 layers, identical weights, only the norms moved
    torch.manual_seed(0)
    post_norm = nn.ModuleList(EncoderLayer(128, 4, 512, dropout=0.0) for _ in range(12))
    pre_norm = copy.deepcopy(post_norm)
    for layer in pre_norm:
        layer.norm_first = True
    x = torch.randn(8, 32, 128)
    detached = nn.ModuleList(
        ReadsADetachedStream(128, 4, 512, dropout=0.0, norm_first=True) for _ in range(12)
    )
    detached.load_state_dict(pre_norm.state_dict())
    stats = {
        "post-norm (paper)": per_layer_statistics(post_norm, x),
        "pre-norm": per_layer_statistics(pre_norm, x),
        "pre-norm, paths through sublayers cut": per_layer_statistics(detached, x),
    }
    styles = {
        "post-norm (paper)": ("o-", "#3f51b5"),
        "pre-norm": ("o-", "#e65100"),
        "pre-norm, paths through sublayers cut": ("s--", "#2e7d32"),
    }
    layers = np.arange(1, 13)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.4))
    for name, (rms, grads) in stats.items():
        marker, colour = styles[name]
        left.plot(layers, rms, marker, color=colour, label=name, ms=4, mfc="none")
        right.plot(layers, grads, marker, color=colour, label=name, ms=4, mfc="none")
    left.set_title("RMS of each layer's output", loc="left", fontsize=9.5)
    right.set_title("norm of the gradient of each layer's parameters", loc="left", fontsize=9.5)
    left.set_ylim(bottom=0.9)
    right.set_ylim(bottom=0)
    for ax in (left, right):
        ax.set_xlabel("layer")
        ax.set_xticks(layers)
        ax.grid(alpha=0.3)
    right.legend(frameon=False, loc="lower left")  # one legend: the left panel has no room
    fig.tight_layout()
    return fig
