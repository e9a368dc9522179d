"""Figures of docs/transformer/attention.md: scaling the scores, and the masks."""

import matplotlib.pyplot as plt
import torch

from snippets.figures import figure

TRANSFORMER = "snippets/transformer.py"  # the code these figures draw from


@figure("attention-scaling.svg", inputs=(TRANSFORMER,))
def attention_scaling():
    generator = torch.Generator().manual_seed(0)
    dims = [2**n for n in range(1, 11)]  # D = 2 ... 1024
    variance = {"q·k": [], "q·k / √D": []}
    largest = {"q·k": [], "q·k / √D": []}
    for dim in dims:
        queries = torch.randn(2000, dim, generator=generator)
        keys = torch.randn(32, dim, generator=generator)
        raw = queries @ keys.T  # (2000, 32)
        for name, scores in (("q·k", raw), ("q·k / √D", raw / dim**0.5)):
            variance[name].append(scores.var().item())
            largest[name].append(torch.softmax(scores, dim=-1).amax(dim=-1).mean().item())
    colours = {"q·k": "#e65100", "q·k / √D": "#3f51b5"}
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.4))
    for name, colour in colours.items():
        left.plot(dims, variance[name], "o-", color=colour, label=name, ms=4)
        right.plot(dims, largest[name], "o-", color=colour, label=name, ms=4)
    left.set_xscale("log", base=2)
    left.set_yscale("log", base=2)
    left.set_title("variance of the scores", loc="left", fontsize=9.5)
    right.set_xscale("log", base=2)
    right.set_ylim(0, 1.05)
    right.set_title("average largest weight after softmax (32 keys)", loc="left", fontsize=9.5)
    for ax in (left, right):
        ax.set_xlabel("D, the size of queries and keys")
        ax.grid(alpha=0.3)
        ax.legend(frameon=False)
    fig.tight_layout()
    return fig


@figure("attention-masks.svg", inputs=(TRANSFORMER,))
def attention_masks():
    from snippets.transformer import causal_mask, padding_mask

    tokens = torch.tensor([[5, 7, 3, 9, 0], [4, 8, 0, 0, 0]])  # the chapter's batch, pad id 0
    T = tokens.size(1)
    padding = padding_mask(tokens, 0).expand(-1, -1, T, -1)[:, 0]  # (B, T, T): as broadcast
    causal = causal_mask(T)
    fig, axes = plt.subplots(2, 3, figsize=(9.5, 6.4))
    for b in range(tokens.size(0)):
        panels = [
            ("padding_mask(tokens, 0)", padding[b]),
            ("causal_mask(5)", causal),
            ("padding & causal", padding[b] & causal),
        ]
        for ax, (title, mask) in zip(axes[b], panels, strict=True):
            ax.imshow(mask.numpy(), cmap="Blues", vmin=-0.3, vmax=1.2)
            for t in range(T):
                for s in range(T):
                    ax.text(
                        s,
                        t,
                        int(mask[t, s]),
                        ha="center",
                        va="center",
                        fontsize=9,
                        color="white" if mask[t, s] else "#777777",
                    )
            keys = [f"{s}\n{tokens[b, s].item() or 'pad'}" for s in range(T)]
            ax.set_xticks(range(T), keys, fontsize=8)
            ax.set_yticks(range(T))
            ax.tick_params(length=0)
            ax.set_title(f"sequence {b}: {title}", loc="left", fontsize=9)
            for side in ax.spines.values():
                side.set_visible(False)
        axes[b, 0].set_ylabel("query t")
    for ax in axes[1]:
        ax.set_xlabel("key s (position, token)")
    fig.suptitle("1 = True = may attend", x=0.01, ha="left", fontsize=9.5, color="#555555")
    fig.tight_layout()
    return fig
