"""The landing page's map of the book: each part of the nav as a row of its chapters,
in nav order, with the shape of the tensor each chapter hands to the next."""

import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch

from snippets.book import MKDOCS_YML, nav
from snippets.figures import figure

# each chapter's box: a short name and what it hands on; the parts and their order
# come from the nav of mkdocs.yml
BOXES = {
    "bert/tokenizer.md": ("Tokenizer", "ids (B, T)"),
    "bert/model.md": ("Model &\nconfig", "BertModel"),
    "bert/embeddings.md": ("Embeddings", "(B, T, C)"),
    "bert/self-attention.md": ("Self-\nattention", "(B, H, T, T)"),
    "bert/attention-output.md": ("Add & norm", "(B, T, C)"),
    "bert/feed-forward.md": ("Feed-\nforward", "(B, T, C)"),
    "bert/encoder.md": ("Encoder", "L × (B, T, C)"),
    "bert/pooler.md": ("Pooler", "(B, C)"),
    "bert/sentence-embeddings.md": ("Sentence\nembeddings", "(B, C)"),
    "bert/task-heads.md": ("Task\nheads", "(B, 2)"),
    "training/masking.md": ("Masking\nrecipe", "ids, labels"),
    "training/pretraining.md": ("Pretraining\nMLM & NSP", "weights"),
    "training/mlm-head.md": ("MLM head", "(M, V)"),
    "training/fine-tuning.md": ("Fine-\ntuning", "(B, 2)"),
    "transformer/embeddings.md": ("Embeddings\n& positions", "(B, T, C)"),
    "transformer/attention.md": ("Attention\n& masks", "(B, H, T, T)"),
    "transformer/multi-head.md": ("Multi-head", "(B, T, C)"),
    "transformer/feed-forward.md": ("FFN &\nLayerNorm", "(B, T, C)"),
    "transformer/layers.md": ("Encoder &\ndecoder", "(B, T, C)"),
    "transformer/model.md": ("Full model", "(B, T, V)"),
    "transformer/training.md": ("Training", "loss"),
    "gpt2/encoder-to-decoder.md": ("Encoder to\ndecoder", "(B, T, C)"),
    "gpt2/tokenizer.md": ("Byte-level\nBPE", "ids (1, T)"),
    "gpt2/training.md": ("Training\na GPT-2", "weights"),
    "gpt2/forward.md": ("Forward\npass", "logits (1, T, V)"),
    "gpt2/generation.md": ("Generation", "next id"),
    "gpt2/kv-cache.md": ("KV cache", "(1, H, T, D)"),
    "gpt2/beam-search.md": ("Beams &\nbatches", "ids (B, T')"),
    "gpt2/smollm2.md": ("SmolLM2", "text"),
    "gpt2/looking-inside.md": ("Looking\ninside", "(L + 1, T, V)"),
    "efficient/tiled-attention.md": ("Tiled\nattention", "(B, H, T, D)"),
    "efficient/quantization.md": ("Quanti-\nzation", "bytes (n, 20)"),
    "efficient/speculative-decoding.md": ("Specu-\nlative", "ids (1, T + k)"),
    "efficient/lora.md": ("LoRA", "B A (C, C)"),
}
COLOURS = ["#3f51b5", "#6a1b9a", "#00897b", "#e65100", "#546e7a", "#ad1457"]


def parts() -> list[tuple[str, list[tuple[str, str, str]]]]:
    """Each part of the nav, in order: (title, [(box name, page, what it hands on)]).

    A part is a titled section of chapters; the Labs section (notebooks and live pages)
    is not a part.
    """
    rows = []
    for title, pages in nav():
        chapters = [page for _, page in pages if not page.startswith(("labs/", "live/"))]
        if not title or not chapters:
            continue
        missing = [page for page in chapters if page not in BOXES]
        if missing:
            raise KeyError(
                f"snippets/figures/tour.py: add {missing} to BOXES, so the tour shows it"
            )
        rows.append((title, [(BOXES[page][0], page, BOXES[page][1]) for page in chapters]))
    return rows


@figure("tour.svg", inputs=(MKDOCS_YML,))
def tour():
    tour = parts()
    columns = max(len(chapters) for _, chapters in tour)
    box_w, box_h, gap, row_h = 1.05, 0.58, 0.16, 1.55
    width = columns * (box_w + gap) - gap + 0.1
    height = row_h * (len(tour) - 1) + box_h + 1.8
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))  # one data unit is one inch: text fits the boxes
    for row, ((title, chapters), colour) in enumerate(zip(tour, COLOURS, strict=False)):
        y = row_h * (len(tour) - 1 - row)
        ax.text(0, y + box_h + 0.22, title, fontsize=10, weight="bold", color=colour)
        for i, (name, _, hands_on) in enumerate(chapters):
            x = i * (box_w + gap)
            ax.add_patch(
                FancyBboxPatch(
                    (x, y),
                    box_w,
                    box_h,
                    boxstyle="round,pad=0.03",
                    facecolor=colour,
                    edgecolor=colour,
                    linewidth=1.3,
                )
            )
            ax.text(
                x + box_w / 2,
                y + box_h / 2,
                name,
                ha="center",
                va="center",
                fontsize=8.5,
                color="white",
            )
            ax.text(
                x + box_w / 2,
                y - 0.12,
                hands_on,
                ha="center",
                va="top",
                fontsize=7.5,
                color="#555555",
                family="monospace",
            )
            if i:
                ax.annotate(
                    "",
                    xy=(x - 0.03, y + box_h / 2),
                    xytext=(x - gap + 0.03, y + box_h / 2),
                    arrowprops={
                        "arrowstyle": "-|>",
                        "color": colour,
                        "lw": 1.1,
                        "shrinkA": 0,
                        "shrinkB": 0,
                    },
                )
    ax.text(
        0,
        -0.75,
        "B batch · T tokens · C hidden size · H heads · D head size · V vocabulary · L layers\n"
        "M masked tokens",
        fontsize=8,
        color="#555555",
        va="top",
    )
    ax.set_xlim(-0.05, width - 0.05)
    ax.set_ylim(-1.3, height - 1.3)
    ax.axis("off")
    return fig
