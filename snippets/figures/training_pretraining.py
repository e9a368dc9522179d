"""Figures of docs/training/pretraining.md: the shipped run's losses and held-out accuracies."""

import matplotlib.pyplot as plt
import numpy as np

from snippets.book import read_json
from snippets.figures import figure
from snippets.hub import BERT_SHAKESPEARE

METRICS = BERT_SHAKESPEARE.trained_here / "metrics.json"


def smoothed(values, window):
    return np.convolve(values, np.ones(window) / window, mode="valid")


@figure("pretraining-curves.svg", inputs=(METRICS,))
def pretraining_curves():
    """The shipped run's losses per step and its held-out accuracies, from its metrics.json."""
    metrics = read_json(METRICS)
    held = metrics["held_out"]
    held_steps = [e["step"] for e in held]
    window = 50
    fig, (mlm, accuracy, nsp) = plt.subplots(1, 3, figsize=(11, 3.4))
    for ax, key, colour in [(mlm, "mlm_loss", "#3f51b5"), (nsp, "nsp_loss", "#00897b")]:
        losses = np.array(metrics[key])
        steps = np.arange(1, len(losses) + 1)
        ax.plot(steps, losses, color="#dddddd", lw=0.6, label="training batch")
        ax.plot(
            steps[window - 1 :],
            smoothed(losses, window),
            color=colour,
            lw=1.6,
            label=f"mean of {window} steps",
        )
        ax.set_xlabel("training step")
    # the NSP loss stays near ln 2, where a label on the line would sit under the curve
    nsp.axhline(np.log(2), color="#555555", ls="--", lw=1, label="ln 2: a coin flip")
    for ax in (mlm, nsp):
        ax.legend(frameon=False, fontsize=8)
    mlm.set_ylabel("MLM loss (nats per masked token)")
    mlm.set_ylim(top=np.log(30522) + 0.5)  # ln V: the loss of a uniform guess
    nsp.set_ylabel("NSP loss (nats per pair)")
    curves = [  # key, marker and line, colour, label
        ("mlm_top5", "o-", "#7986cb", "MLM top-5"),
        ("mlm_top1", "o-", "#3f51b5", "MLM top-1"),
        ("mlm_top1_words", "o--", "#3f51b5", "MLM top-1, words only"),
        ("nsp_accuracy", "s-", "#00897b", "NSP, as trained"),
        ("nsp_within_play", "s--", "#00897b", "NSP, within the play"),
    ]
    for key, style, colour, label in curves:
        accuracy.plot(held_steps, [e[key] for e in held], style, ms=3, color=colour, label=label)
    accuracy.set_ylim(0, 1)
    accuracy.set_xlabel("training step")
    accuracy.set_ylabel("accuracy on the held-out play")
    accuracy.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return fig
