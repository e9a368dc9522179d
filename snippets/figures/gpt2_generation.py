"""Figures of docs/gpt2/generation.md: what each logits processor does to the distribution."""

import matplotlib.pyplot as plt

from snippets import decoding
from snippets.figures import figure
from snippets.figures._gpt2 import WEIGHTS, shipped_model

PROMPT = "KING.\nWhat say you, my lord? Shall we"  # the prompt of docs/gpt2/generation.md


@figure("gpt2-generation-processors.svg", inputs=(WEIGHTS, "snippets/decoding.py"))
def generation_processors():
    import torch

    model, tokenizer = shipped_model()
    ids = tokenizer(PROMPT, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        scores = model(ids).logits[:, -1]  # (1, V)
    settings = {
        "the model's distribution": scores,
        "temperature 0.5": decoding.apply_temperature(scores, 0.5),
        "temperature 1.5": decoding.apply_temperature(scores, 1.5),
        "top-k 5": decoding.keep_top_k(scores, 5),
        "top-p 0.8": decoding.keep_top_p(scores, 0.8),
        "repetition penalty 1.5": decoding.penalize_repetition(scores, ids, 1.5),
    }
    shown = scores[0].topk(12).indices
    labels = [repr(tokenizer.decode(i)) for i in shown.tolist()]
    in_prompt = torch.isin(shown, ids[0])
    base = scores.softmax(dim=-1)[0, shown].numpy()
    fig, axes = plt.subplots(2, 3, figsize=(10, 5.6), sharey=True)
    for ax, (title, processed) in zip(axes.flat, settings.items(), strict=True):
        probs = processed.softmax(dim=-1)[0, shown].numpy()
        colours = ["#e65100" if seen else "#3f51b5" for seen in in_prompt.tolist()]
        ax.bar(range(len(shown)), base, color="none", edgecolor="#bbbbbb", lw=0.8)
        ax.bar(range(len(shown)), probs, color=colours, width=0.6)
        ax.set_title(title, fontsize=9.5)
        ax.set_xticks(range(len(shown)), labels, rotation=60, ha="right", fontsize=7.5)
        left = int((processed[0] > float("-inf")).sum())
        ax.text(
            0.98,
            0.95,
            f"{left:,} tokens left",
            transform=ax.transAxes,
            ha="right",
            va="top",
            fontsize=8,
            color="#555555",
        )
    for ax in axes[:, 0]:
        ax.set_ylabel("probability")
    fig.suptitle(
        f"the next token after {PROMPT!r}: grey outlines are the model's own "
        "probabilities; orange tokens are in the prompt",
        fontsize=9,
    )
    fig.tight_layout()
    return fig
