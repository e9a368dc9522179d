"""Figures of docs/transformer/training.md: the digit-reversal run's loss and cross-attention."""

import inspect

import matplotlib.pyplot as plt
import numpy as np
import torch

from snippets.book import REPO_ROOT, computed_once
from snippets.figures import figure

TRANSFORMER = "snippets/transformer.py"  # the code these figures draw from
TRAINING = "snippets/digit_reversal.py"


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
