"""Figures of docs/transformer/embeddings.md, drawn from snippets/transformer.py's encoding."""

import matplotlib.pyplot as plt
import numpy as np

from snippets.figures import figure
from snippets.transformer import sinusoidal_positional_encoding

TRANSFORMER = "snippets/transformer.py"  # the code these figures draw from
D_MODEL = 512  # the paper's base size, as on the pages


@figure("embeddings-positional-encoding.svg", inputs=(TRANSFORMER,))
def positional_encoding_heatmap():
    positions = 128
    pe = sinusoidal_positional_encoding(positions, D_MODEL).numpy()  # (T, C)
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.4), sharey=True)
    names = ("sin: even columns 2i", "cos: odd columns 2i + 1")
    for ax, start, name in zip(axes, (0, 1), names, strict=True):
        image = ax.imshow(
            pe[:, start::2], cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest"
        )
        ax.set_xlabel("frequency pair i (slower to the right)")
        ax.set_title(name, loc="left", fontsize=9.5)
    axes[0].set_ylabel("position")
    fig.colorbar(image, ax=axes, fraction=0.025, pad=0.02)
    return fig


@figure("embeddings-similarity.svg", inputs=(TRANSFORMER,))
def positional_similarity():
    positions = 512
    pe = sinusoidal_positional_encoding(positions, D_MODEL)
    similarity = (pe @ pe.T / (D_MODEL // 2)).numpy()  # (T, T) cosine similarity
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.6), width_ratios=(1, 1.5))
    shown = 128
    image = left.imshow(similarity[:shown, :shown], cmap="viridis", vmin=0, vmax=1)
    left.set_xlabel("position q")
    left.set_ylabel("position p")
    left.set_title("cos(PE_p, PE_q): constant along diagonals", loc="left", fontsize=9.5)
    fig.colorbar(image, ax=left, fraction=0.046, pad=0.04)
    distance = np.arange(positions)
    right.plot(distance, similarity[0], color="#3f51b5", lw=1.4)
    right.set_xlabel("distance |p − q| in positions")
    right.set_ylabel("cosine similarity")
    right.set_ylim(0, 1.02)
    right.set_xlim(0, positions - 1)
    right.grid(alpha=0.3)
    right.set_title("similarity against distance", loc="left", fontsize=9.5)
    fig.tight_layout()
    return fig
