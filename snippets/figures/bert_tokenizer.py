"""Figures of docs/bert/tokenizer.md: the padded batch, its mask and its token types."""

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

from snippets.figures import figure
from snippets.hub import MINILM

# the batch drawn here is the one the chapter tokenizes
QUESTIONS = ["Where is the cat?", "Who wrote Hamlet?", "Why?"]
ANSWERS = ["On the mat.", "Shakespeare wrote it around 1600.", "Because."]


@figure("tokenizer-batch.svg")
def padded_batch():
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(MINILM.repo_id)
    batch = tokenizer(QUESTIONS, ANSWERS, padding=True)
    rows = len(batch["input_ids"])
    cols = len(batch["input_ids"][0])
    segment_colours = ["#c5cae9", "#ffe0b2"]  # sentence A, sentence B
    panels = [
        ("tokens, coloured by token_type_ids", "input_ids"),
        ("attention_mask: 1 = a real token, 0 = padding", "attention_mask"),
        ("token_type_ids: 0 = first sentence, 1 = second", "token_type_ids"),
    ]
    fig, axes = plt.subplots(3, 1, figsize=(0.78 * cols + 1.4, 1.0 + 1.45 * rows))
    for ax, (title, key) in zip(axes, panels, strict=True):
        for r in range(rows):
            for c in range(cols):
                real = batch["attention_mask"][r][c] == 1
                segment = batch["token_type_ids"][r][c]
                if key == "input_ids":
                    label = tokenizer.convert_ids_to_tokens(batch["input_ids"][r][c])
                    colour = segment_colours[segment] if real else "#eeeeee"
                else:
                    label = str(batch[key][r][c])
                    colour = "#7986cb" if batch[key][r][c] else "#eeeeee"
                ax.add_patch(
                    Rectangle((c, rows - 1 - r), 1, 1, facecolor=colour, edgecolor="white", lw=2)
                )
                ax.text(
                    c + 0.5,
                    rows - 0.5 - r,
                    label,
                    ha="center",
                    va="center",
                    fontsize=7.5 if len(label) > 6 else 8.5,
                    color="#333333" if real or key != "input_ids" else "#999999",
                )
        ax.set_xlim(0, cols)
        ax.set_ylim(0, rows)
        ax.set_yticks([rows - 0.5 - r for r in range(rows)], [f"sequence {r}" for r in range(rows)])
        ax.set_xticks([c + 0.5 for c in range(cols)], range(cols), fontsize=7)
        ax.tick_params(length=0)
        ax.set_title(title, loc="left", fontsize=9.5)
        for side in ax.spines.values():
            side.set_visible(False)
    axes[-1].set_xlabel("position in the padded batch (T)")
    fig.tight_layout()
    return fig
