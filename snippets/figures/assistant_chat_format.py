"""The figures of docs/assistant/chat-format.md."""

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
from transformers import AutoTokenizer

from snippets.chat_format import conversation, encode
from snippets.figures import figure
from snippets.hub import smollm2_dir

COLOURS = {"system": "#e0e0e0", "user": "#bbdefb", "assistant": "#ffe0b2"}
COUNTED = "#e65100"


def shown(token):
    """A token as the figure writes it: byte-level BPE's space and newline made visible."""
    return token.replace("Ġ", "·").replace("Ċ", "↵")


@figure("assistant-chat-format.svg", inputs=("snippets/chat_format.py",))
def the_tokens_the_loss_counts():
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir())
    encoded = encode(tokenizer, conversation)
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"])
    rows, row = [], []  # one row per message: a new row at each <|im_start|>
    for token, role, counted in zip(
        tokens, encoded["roles"], encoded["assistant_mask"].tolist(), strict=True
    ):
        if token == "<|im_start|>" and row:
            rows.append(row)
            row = []
        row.append((token, role, counted))
    rows.append(row)
    widths = [[0.14 + 0.085 * len(shown(token)) for token, _, _ in row] for row in rows]
    fig, ax = plt.subplots(figsize=(10, 0.62 * len(rows) + 0.5))
    for r, (row, row_widths) in enumerate(zip(rows, widths, strict=True)):
        x, y = 0.0, -r
        for (token, role, counted), width in zip(row, row_widths, strict=True):
            ax.add_patch(
                Rectangle(
                    (x, y - 0.3),
                    width,
                    0.6,
                    facecolor=COLOURS[role],
                    edgecolor=COUNTED if counted else "white",
                    linewidth=2 if counted else 1,
                )
            )
            ax.text(x + width / 2, y, shown(token), ha="center", va="center", fontsize=7.5)
            if counted:
                ax.plot([x + 0.05, x + width - 0.05], [y - 0.4, y - 0.4], color=COUNTED, lw=2)
            x += width + 0.04
    ax.set_xlim(-0.1, max(sum(w) + 0.04 * len(w) for w in widths) + 0.1)
    ax.set_ylim(-len(rows) + 0.4, 0.55)
    ax.axis("off")
    handles = [Rectangle((0, 0), 1, 1, facecolor=c, label=role) for role, c in COLOURS.items()]
    handles.append(
        Rectangle((0, 0), 1, 1, facecolor="white", edgecolor=COUNTED, lw=2, label="loss counts")
    )
    ax.legend(handles=handles, loc="lower right", ncol=4, frameon=False, fontsize=8)
    ax.set_title(
        "Each message on a row, coloured by role; outlined and underlined: counted"
        " (· a space, ↵ a newline)"
    )
    return fig
