"""Figures of Part II, a Transformer from scratch (docs/transformer/).

Each is drawn from the modules in snippets/transformer.py, the code the chapters
include, so a change there redraws them.
"""

import inspect

import matplotlib.pyplot as plt
import numpy as np
import torch

from snippets.book import REPO_ROOT, computed_once
from snippets.figures import figure
from snippets.transformer import sinusoidal_positional_encoding

TRANSFORMER = "snippets/transformer.py"  # the code these figures draw from
TRAINING = "snippets/digit_reversal.py"
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


def reversal_run() -> dict:
    """The training chapter's run, `train_reversal()`: its losses and held-out exact match.

    Training takes tens of seconds and the figure build runs often (the tests build
    every figure several times), so it runs once per version of the model and
    training code.
    """

    def run():
        from snippets.digit_reversal import PAD, exact_match, train_reversal

        model, losses, (source, target) = train_reversal()
        # decoder layer 1's cross-attention, teacher-forced on the held-out set
        captured = []
        hook = model.decoder.layers[1].cross_attn.register_forward_hook(
            lambda module, args, out: captured.append(out[1])
        )
        model.eval()
        with torch.no_grad():
            model(source, target[:, :-1])
        hook.remove()
        weights = captured[0]  # (N, H, T, S)
        # the query that reads position t of the decoder's input predicts output digit t,
        # which is source digit n - 1 - t: its mirror
        lengths = (source != PAD).sum(dim=1)  # (N,)
        t = torch.arange(weights.shape[2])  # (T,)
        predicts_a_digit = t[None, :] < lengths[:, None]  # (N, T)
        mirror = (lengths[:, None] - 1 - t[None, :]).clamp(min=0)  # (N, T)
        index = mirror[:, None, :, None].expand(-1, weights.shape[1], -1, 1)  # (N, H, T, 1)
        on_mirror = weights.gather(-1, index)[..., 0]  # (N, H, T)
        share = (on_mirror * predicts_a_digit[:, None]).sum(dim=(0, 2)) / predicts_a_digit.sum()
        example = int((lengths == 6).nonzero()[0])  # one sequence of six digits
        return {
            "losses": losses,
            "exact_match": exact_match(model, source, target),
            "mirror_share": share.tolist(),  # (H,): each head's mean weight on the mirror
            "example": {
                "source": source[example].tolist(),
                "decoder_input": target[example, :-1].tolist(),
                "cross_attention": weights[example].tolist(),  # (H, T, S)
            },
        }

    sources = [(REPO_ROOT / path).read_bytes() for path in (TRANSFORMER, TRAINING)]
    sources.append(inspect.getsource(reversal_run).encode())  # what it keeps of the run
    return computed_once("training-reversal", sources, run)


@figure("training-cross-attention.svg", inputs=(TRANSFORMER, TRAINING))
def training_cross_attention():
    from snippets.digit_reversal import BOS, EOS, PAD

    run = reversal_run()
    example = run["example"]
    names = {PAD: "PAD", BOS: "BOS", EOS: "EOS"} | {i + 3: str(i) for i in range(10)}
    sources = [names[i] for i in example["source"]]
    reads = [names[i] for i in example["decoder_input"]]
    weights = np.array(example["cross_attention"])  # (H, T, S)
    n = sum(token != PAD for token in example["source"])
    fig, axes = plt.subplots(1, len(weights), figsize=(10, 3.6), sharey=True, layout="constrained")
    for head, ax in enumerate(axes):
        image = ax.imshow(weights[head], cmap="Blues", vmin=0, vmax=1)
        for t in range(n):  # outline each digit-predicting query's mirror key
            ax.add_patch(
                plt.Rectangle((n - 1 - t - 0.5, t - 0.5), 1, 1, fill=False, ec="#e65100", lw=1.2)
            )
        ax.set_title(f"head {head}: {run['mirror_share'][head]:.2f} on the mirror", fontsize=9.5)
        ax.set_xticks(range(len(sources)), sources, fontsize=9, rotation=90)
        ax.set_yticks(range(len(reads)), reads, fontsize=9)
        ax.set_xlabel("source token (key)")
    axes[0].set_ylabel("decoder reads (query)")
    fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight")
    fig.suptitle(
        "decoder layer 1, cross-attention, on a held-out sequence; outlined: the "
        "mirror digit; titles: mean weight on it over the 1,000 held-out sequences",
        fontsize=9.5,
    )
    return fig


@figure("training-loss.svg", inputs=(TRANSFORMER, TRAINING))
def training_loss():
    from snippets.digit_reversal import STEPS

    run = reversal_run()
    losses = np.array(run["losses"])
    steps = np.arange(1, len(losses) + 1)
    window = 25
    smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
    fig, ax = plt.subplots(figsize=(8.5, 3.4))
    ax.plot(steps, losses, color="#9fa8da", lw=0.8, label="loss of each batch")
    ax.plot(steps[window - 1 :], smooth, color="#3f51b5", lw=1.8, label=f"mean of {window} steps")
    smoothed = torch.full((13,), 0.1 / 13) + 0.9 * torch.nn.functional.one_hot(torch.tensor(3), 13)
    floor = -(smoothed * smoothed.log()).sum().item()  # the chapter's floor: ε_ls = 0.1, V = 13
    ax.axhline(floor, color="#e65100", lw=1, ls="--", label=f"lowest possible loss, {floor:.3f}")
    ax.set_yscale("log")
    ax.set_yticks([0.5, 1, 2, 4], ["0.5", "1", "2", "4"])
    ax.yaxis.set_minor_formatter(plt.NullFormatter())
    ax.set_xlim(0, STEPS)
    ax.set_xlabel("training step (128 sequences each)")
    ax.set_ylabel("cross-entropy per token")
    ax.grid(alpha=0.3)
    ax.legend(frameon=False)
    ax.set_title(
        f"Reversing 3 to 8 digits; held-out exact match after training: {run['exact_match']:.1%}",
        loc="left",
        fontsize=9.5,
    )
    fig.tight_layout()
    return fig
