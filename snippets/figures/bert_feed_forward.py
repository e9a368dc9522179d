"""Figures of docs/bert/feed-forward.md: exact GELU against its tanh approximation."""

import matplotlib.pyplot as plt
import numpy as np
import torch

from snippets.figures import figure
from snippets.figures._minilm import attention_sentence_outputs, minilm


@figure("feed-forward-gelu.svg", inputs=("snippets/bert_by_hand.py",))
def gelu_difference():
    from snippets.bert_by_hand import gelu, gelu_tanh, linear

    tokens, outputs = attention_sentence_outputs()
    layer = minilm().encoder.layer[0]
    with torch.no_grad():
        attention_output = layer.attention(outputs.hidden_states[0])[0]
        widened = linear(attention_output, layer.intermediate.dense).flatten()
    x = torch.linspace(-6, 6, 1201, dtype=torch.float64)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 3.6))
    left.plot(x, gelu(x), color="#3f51b5", lw=2.2, label="GELU, exact (erf): BERT's")
    left.plot(x, gelu_tanh(x), color="#ff8a65", lw=1.0, ls="--", label="tanh approximation")
    left.plot(x, torch.relu(x), color="#bdbdbd", lw=0.8, label="ReLU, for comparison")
    left.set_xlim(-4, 3)
    left.set_ylim(-0.5, 3)
    left.legend(fontsize=8, frameon=False)
    left.set_title("the two curves, on top of each other", loc="left", fontsize=9.5)
    right.plot(x, gelu(x) - gelu_tanh(x), color="#e65100", lw=1.4)
    right.axhline(0, color="#999999", lw=0.6)
    right.set_ylabel("exact − tanh")
    right.set_xlabel("pre-activation")
    share = right.twinx()
    share.hist(widened.numpy(), bins=np.linspace(-6, 6, 97), color="#3f51b5", alpha=0.25)
    share.set_ylabel("count of layer 0's pre-activations", color="#3f51b5")
    share.spines["right"].set_visible(True)
    right.set_title(
        f"their difference, over where MiniLM's inputs to GELU lie ({len(tokens)} tokens)",
        loc="left",
        fontsize=9.5,
    )
    fig.tight_layout()
    return fig
