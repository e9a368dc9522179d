"""Figures of docs/gpt2/training.md: the book's GPT-2's training and held-out losses."""

import matplotlib.pyplot as plt
import numpy as np

from snippets.book import read_json
from snippets.figures import figure
from snippets.hub import GPT2_SHAKESPEARE

METRICS = GPT2_SHAKESPEARE.trained_here / "metrics.json"


@figure("gpt2-training-loss.svg", inputs=(METRICS,))
def training_loss():
    metrics = read_json(METRICS)
    train = np.array(metrics["train_loss"])
    steps = np.arange(1, len(train) + 1)
    window = 50
    smooth = np.convolve(train, np.ones(window) / window, mode="valid")
    held = metrics["held_out"]
    fig, (per_token, per_char) = plt.subplots(1, 2, figsize=(9.5, 3.6))
    per_token.plot(steps, train, color="#c5cae9", lw=0.8, label="training batch")
    per_token.plot(
        steps[window - 1 :],
        smooth,
        color="#3f51b5",
        lw=1.6,
        label=f"training, mean of {window} steps",
    )
    per_token.plot(
        [e["step"] for e in held],
        [e["nats_per_token"] for e in held],
        "o-",
        color="#e65100",
        ms=4,
        label="held-out play",
    )
    per_token.set_ylim(
        bottom=min(smooth.min(), held[-1]["nats_per_token"]) - 0.3,
        top=held[1]["nats_per_token"] + 1.0,
    )
    per_token.set_xlabel("training step")
    per_token.set_ylabel("loss (nats per token)")
    per_token.legend(frameon=False, fontsize=8)
    per_char.plot(
        [e["step"] for e in held], [e["nats_per_char"] for e in held], "o-", color="#e65100", ms=4
    )
    per_char.axhline(1.5, color="#555555", ls="--", lw=1)
    per_char.text(0, 1.5, " the bar: 1.5", va="bottom", fontsize=8, color="#555555")
    per_char.set_ylim(1.2, held[1]["nats_per_char"] + 0.3)
    per_char.set_xlabel("training step")
    per_char.set_ylabel("held-out loss (nats per character)")
    final = held[-1]
    per_char.annotate(
        f"{final['nats_per_char']:.3f}",
        (final["step"], final["nats_per_char"]),
        textcoords="offset points",
        xytext=(-10, 8),
        ha="right",
        fontsize=8,
    )
    fig.tight_layout()
    return fig
