"""The landing page's map of the book: each part as a row of chapters, with the
shape of the tensor each chapter hands to the next. Chapters already in the nav
are drawn solid; planned ones dashed."""

from functools import cache

import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch

from snippets.figures import REPO_ROOT, figure

# (part title, [(chapter, page, what it hands on)])
TOUR = [
    (
        "Part I: BERT, tensor by tensor",
        [
            ("Tokenizer", "bert/tokenizer.md", "ids (B, T)"),
            ("Model &\nconfig", "bert/model.md", "BertModel"),
            ("Embeddings", "bert/embeddings.md", "(B, T, C)"),
            ("Self-\nattention", "bert/self-attention.md", "(B, H, T, T)"),
            ("Add & norm", "bert/attention-output.md", "(B, T, C)"),
            ("Feed-\nforward", "bert/feed-forward.md", "(B, T, C)"),
            ("Encoder", "bert/encoder.md", "L × (B, T, C)"),
            ("Pooler\n& heads", "bert/pooler-and-heads.md", "(B, C)"),
        ],
    ),
    (
        "Part II: A Transformer from scratch",
        [
            ("Embeddings\n& positions", "transformer/embeddings.md", "(B, T, C)"),
            ("Attention\n& masks", "transformer/attention.md", "(B, H, T, T)"),
            ("Multi-head", "transformer/multi-head.md", "(B, T, C)"),
            ("FFN &\nLayerNorm", "transformer/feed-forward.md", "(B, T, C)"),
            ("Encoder &\ndecoder", "transformer/layers.md", "(B, T, C)"),
            ("Full model", "transformer/model.md", "(B, T, V)"),
            ("Training", "transformer/training.md", "loss"),
        ],
    ),
    (
        "Part III: GPT-2, from logits to text",
        [
            ("Byte-level\nBPE", "gpt2/tokenizer.md", "ids (1, T)"),
            ("Training\na GPT-2", "gpt2/training.md", "weights"),
            ("Forward\npass", "gpt2/forward.md", "logits (1, T, V)"),
            ("Generation", "gpt2/generation.md", "next id"),
            ("KV cache", "gpt2/kv-cache.md", "(1, H, T, D)"),
            ("SmolLM2", "gpt2/smollm2.md", "text"),
        ],
    ),
]


@cache
def pages_in_nav() -> frozenset[str]:
    from mkdocs.config import load_config

    found = set()

    def walk(node):
        if isinstance(node, str):
            found.add(node)
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(load_config(str(REPO_ROOT / "mkdocs.yml")).nav)
    return frozenset(found)


@figure("tour.svg", inputs=("mkdocs.yml",))
def tour():
    written = pages_in_nav()
    columns = max(len(chapters) for _, chapters in TOUR)
    box_w, box_h, gap, row_h = 1.05, 0.58, 0.16, 1.55
    width = columns * (box_w + gap) - gap + 0.1
    height = row_h * (len(TOUR) - 1) + box_h + 1.8
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))  # one data unit is one inch: text fits the boxes
    colours = ["#3f51b5", "#00897b", "#e65100"]
    for row, ((title, chapters), colour) in enumerate(zip(TOUR, colours, strict=True)):
        y = row_h * (len(TOUR) - 1 - row)
        ax.text(0, y + box_h + 0.22, title, fontsize=10, weight="bold",
                color=colour)  # fmt: skip
        for i, (name, page, hands_on) in enumerate(chapters):
            x = i * (box_w + gap)
            done = page in written
            ax.add_patch(
                FancyBboxPatch(
                    (x, y), box_w, box_h, boxstyle="round,pad=0.03",
                    facecolor=colour if done else "white", edgecolor=colour,
                    linestyle="-" if done else (0, (3, 2)), linewidth=1.3,
                )
            )  # fmt: skip
            ax.text(
                x + box_w / 2, y + box_h / 2, name, ha="center", va="center", fontsize=8.5,
                color="white" if done else colour,
            )  # fmt: skip
            ax.text(x + box_w / 2, y - 0.12, hands_on, ha="center", va="top", fontsize=7.5,
                    color="#555555", family="monospace")  # fmt: skip
            if i:
                ax.annotate(
                    "", xy=(x - 0.03, y + box_h / 2), xytext=(x - gap + 0.03, y + box_h / 2),
                    arrowprops={"arrowstyle": "-|>", "color": colour, "lw": 1.1,
                                "shrinkA": 0, "shrinkB": 0},
                )  # fmt: skip
    ax.text(
        0, -0.75, "solid: written and tested · dashed: planned\n"
        "B batch · T tokens · C hidden size · H heads · D head size · V vocabulary · L layers",
        fontsize=8, color="#555555", va="top",
    )  # fmt: skip
    ax.set_xlim(-0.05, width - 0.05)
    ax.set_ylim(-1.3, height - 1.3)
    ax.axis("off")
    return fig
