"""The figures of docs/assistant/sft.md: which tokens of a batch the loss counts and how
much each weighs, and the loss over the shipped model's run."""

import json

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap

from snippets.figures import figure
from snippets.hub import GPT2_SPEAKER

KINDS = ["padding", "prompt", "completion", "end of text"]  # as drawn: 0, 1, 2, 3
COLOURS = ["#ffffff", "#c9c9c9", "#3f51b5", "#e8710a"]


@figure("assistant-sft.svg", inputs=("snippets/sft.py", "snippets/speaker_task.py"))
def which_tokens_count():
    from transformers import AutoTokenizer

    from snippets.sft import IGNORE, sft_batch
    from snippets.speaker_task import MODEL, speaker_examples

    train, _, _ = speaker_examples(seed=0)
    examples = train[:8]
    batch = sft_batch(AutoTokenizer.from_pretrained(MODEL), examples)
    mask, labels = batch["attention_mask"].numpy(), batch["labels"].numpy()  # (B, T)
    kind = np.where(mask == 1, 1, 0)
    kind[labels != IGNORE] = 2
    kind[(labels == 0) & (mask == 1)] = 3  # the end-of-text token, id 0, counted
    counted = (labels[:, 1:] != IGNORE).sum(1)  # what the loss counts: each row's (T - 1)
    B, n_counted = len(examples), counted.sum()

    fig, (grid, weights) = plt.subplots(
        1, 2, figsize=(9, 3.4), gridspec_kw={"width_ratios": [2.2, 1]}, sharey=True
    )
    grid.imshow(kind, cmap=ListedColormap(COLOURS), vmin=0, vmax=3, aspect="auto")
    grid.set_xticks(np.arange(-0.5, kind.shape[1], 1), minor=True)
    grid.set_yticks(np.arange(-0.5, B, 1), minor=True)
    grid.grid(which="minor", color="#888888", linewidth=0.4)
    grid.tick_params(which="minor", length=0)
    grid.set_yticks(range(B), [e["completion"].strip() for e in examples])
    grid.set_xlabel("position t in the padded batch (B, T)")
    grid.set_title("which tokens the loss counts")
    for k in (1, 2, 3):
        grid.bar(0, 0, color=COLOURS[k], label=KINDS[k])
    grid.bar(0, 0, color=COLOURS[0], edgecolor="#888888", label="padding")
    grid.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=4, frameon=False)

    rows = np.arange(B)
    weights.barh(
        rows - 0.2, [1 / n_counted] * B, 0.4, color="#3f51b5", label="one mean over tokens"
    )
    weights.barh(rows + 0.2, 1 / (B * counted), 0.4, color="#d81b60", label="mean per sequence")
    weights.set_xlabel("weight of each counted token")
    weights.set_title("its weight in the loss")
    weights.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, frameon=False)
    fig.tight_layout()
    return fig


@figure(
    "assistant-sft-run.svg",
    inputs=("snippets/speaker_task.py", "checkpoints/gpt2-shakespeare-speaker/metrics.json"),
)
def the_shipped_run():
    from huggingface_hub import hf_hub_download

    path = hf_hub_download(GPT2_SPEAKER.repo_id, "metrics.json")
    with open(path, encoding="utf-8") as file:
        metrics = json.load(file)
    losses = metrics["losses"]
    settings = metrics["settings"]
    per_epoch = len(losses) // settings["epochs"]
    fig, ax = plt.subplots(figsize=(6.5, 2.8))
    ax.plot(range(1, len(losses) + 1), losses, color="#3f51b5", linewidth=1.2)
    for epoch in range(1, settings["epochs"]):
        ax.axvline(epoch * per_epoch + 0.5, color="#888888", linewidth=0.6, linestyle=":")
    ax.set_ylim(0, None)
    ax.set_xlabel(
        f"step (batches of {settings['batch_size']}, {settings['epochs']} epochs of {per_epoch})"
    )
    ax.set_ylabel("loss over the completion")
    ax.set_title("tensor-by-tensor/gpt2-shakespeare-speaker: its training run")
    fig.tight_layout()
    return fig
