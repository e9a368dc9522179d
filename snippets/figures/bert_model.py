"""Figures of docs/bert/model.md: the parameters of MiniLM and bert-base, block by block."""

import matplotlib.pyplot as plt
import torch

from snippets.figures import figure
from snippets.figures._minilm import minilm


@figure("model-parameters.svg", inputs=("snippets/bert_parameters.py",))
def parameters_per_block():
    from transformers import BertConfig, BertModel

    from snippets.bert_parameters import parameters_by_module

    with torch.device("meta"):  # shapes only: no memory, no random numbers
        base = BertModel(BertConfig())
    counts = {"MiniLM": parameters_by_module(minilm()), "bert-base": parameters_by_module(base)}
    colours = ["#3f51b5", "#9fa8da", "#bdbdbd", "#00897b", "#80cbc4", "#ff8a65", "#6d4c41"]
    fig, ax = plt.subplots(figsize=(9.2, 2.9))
    for row, blocks in enumerate(counts.values()):
        total = sum(blocks.values())
        left = 0.0
        for (block, count), colour in zip(blocks.items(), colours, strict=True):
            millions = count / 1e6
            ax.barh(
                row,
                millions,
                left=left,
                color=colour,
                edgecolor="white",
                height=0.6,
                label=block if row == 0 else None,
            )
            if count / total > 0.07:
                ax.text(
                    left + millions / 2,
                    row,
                    f"{count / total:.0%}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white",
                )
            left += millions
        ax.text(left + 1.2, row, f"{total / 1e6:.1f} M", va="center", fontsize=9)
    ax.set_yticks(range(len(counts)), list(counts))
    ax.invert_yaxis()
    ax.set_xlabel("parameters (millions)")
    ax.set_xlim(0, 122)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.28), ncols=4, fontsize=8, frameon=False)
    ax.spines["left"].set_visible(False)
    ax.tick_params(axis="y", length=0)
    return fig
