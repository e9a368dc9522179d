"""Figures of docs/gpt2/beam-search.md: prefill and decode, in tokens per second."""

import inspect

import matplotlib.pyplot as plt
import numpy as np

from snippets import gpt2_by_hand
from snippets.book import computed_once
from snippets.figures import figure
from snippets.figures._gpt2 import WEIGHTS, median_seconds, shipped_model

# --8<-- [start:prefill_decode_timing]
PROMPT_LENGTH = 128  # tokens in each prompt, and in the cache a decode step reads
BATCH_SIZES = (1, 8)


def measure_prefill_decode(forward, model):
    """Tokens per second of `forward` on `model`, at each batch size: prefill runs
    B prompts of PROMPT_LENGTH tokens at once; decode runs one new token per row after
    a cache of PROMPT_LENGTH. Both keep the last position's logits only, as generation
    does. Medians of 5 timed runs after one untimed run."""
    from functools import partial

    import torch

    generator = torch.Generator().manual_seed(0)
    weight_bytes = sum(w.numel() * w.element_size() for w in model.parameters())
    timings = {
        "threads": torch.get_num_threads(),
        "batch_sizes": list(BATCH_SIZES),
        "weight_bytes": weight_bytes,
        "prefill": [],
        "decode": [],
    }
    with torch.no_grad():
        for B in BATCH_SIZES:
            ids = torch.randint(
                model.config.vocab_size, (B, PROMPT_LENGTH + 1), generator=generator
            )
            prompts, new_tokens = ids[:, :-1], ids[:, -1:]  # (B, T), (B, 1)
            _, cache = forward(model, prompts)
            prefill = median_seconds(partial(forward, model, prompts, logits_to_keep=1))
            decode = median_seconds(partial(forward, model, new_tokens, cache, logits_to_keep=1))
            timings["prefill"].append(B * PROMPT_LENGTH / prefill)
            timings["decode"].append(B / decode)
    return timings


# --8<-- [end:prefill_decode_timing]


def prefill_decode_timing() -> dict:
    """The measurement on the book's GPT-2 and at GPT-2's real size, taken once per
    version of the code that takes it; the figure is drawn from the kept file."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    def measure():
        torch.manual_seed(0)
        models = {
            "the book's GPT-2": shipped_model()[0],
            "GPT-2 124M (random weights)": GPT2LMHeadModel(GPT2Config()).eval(),
        }
        return {
            name: measure_prefill_decode(gpt2_by_hand.forward, model)
            for name, model in models.items()
        }

    sources = [
        inspect.getsource(median_seconds),
        inspect.getsource(measure_prefill_decode),
        inspect.getsource(gpt2_by_hand),
        repr((PROMPT_LENGTH, BATCH_SIZES)),
    ]
    return computed_once("gpt2-prefill-decode", [s.encode() for s in sources], measure)


@figure("gpt2-prefill-decode.svg", inputs=("snippets/gpt2_by_hand.py", WEIGHTS))
def prefill_decode():
    measured = prefill_decode_timing()
    fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.6), sharey=True)
    for ax, (name, timings) in zip(axes, measured.items(), strict=True):
        x = np.arange(len(timings["batch_sizes"]))
        for offset, key, colour in [(-0.2, "prefill", "#e65100"), (0.2, "decode", "#3f51b5")]:
            bars = ax.bar(x + offset, timings[key], width=0.4, color=colour, label=key)
            ax.bar_label(bars, [f"{v:,.0f}" for v in timings[key]], fontsize=8, padding=2)
        ax.set_xticks(x, [f"batch {B}" for B in timings["batch_sizes"]])
        megabytes = timings["weight_bytes"] / 2**20
        ax.set_title(f"{name}\n{megabytes:,.0f} MiB of weights", fontsize=9)
        ax.set_yscale("log")
    axes[0].set_ylabel("tokens per second")
    top = max(max(t["prefill"]) for t in measured.values())
    axes[0].set_ylim(top=top * 4)  # room for the bars' labels
    axes[0].legend(frameon=False, fontsize=8.5, loc="upper left")
    threads = next(iter(measured.values()))["threads"]
    fig.suptitle(
        f"prefill: {PROMPT_LENGTH} tokens per prompt at once; decode: one token "
        f"after {PROMPT_LENGTH} cached; float32, CPU, {threads} threads",
        fontsize=9,
    )
    fig.tight_layout()
    return fig
