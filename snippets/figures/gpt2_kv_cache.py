"""Figures of docs/gpt2/kv-cache.md: the time of the next token, with the cache and without."""

import inspect

import matplotlib.pyplot as plt
import numpy as np

from snippets import gpt2_by_hand
from snippets.book import computed_once
from snippets.figures import figure
from snippets.figures._gpt2 import median_seconds

# --8<-- [start:kv_timing]
TIMED_LENGTHS = (8, 16, 32, 64, 128, 256, 512)


def measure_kv_timing(forward):
    """Seconds for one new token of GPT-2 124M at each length T, run by `forward`: with
    the cache; without it, the next token's logits only (as `generate` computes them) and
    every position's; and the seconds that reading every weight once takes."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).eval()  # random weights: the arithmetic is the same
    ids = torch.randint(model.config.vocab_size, (1, max(TIMED_LENGTHS) + 1))

    timings = {
        "threads": torch.get_num_threads(),
        "lengths": list(TIMED_LENGTHS),
        "cached": [],
        "uncached": [],
        "uncached_all_logits": [],
    }
    with torch.no_grad():
        _, full_cache = forward(model, ids[:, :-1])  # every length's cache, sliced below
        for T in TIMED_LENGTHS:
            cache = [(k[:, :, :T], v[:, :, :T]) for k, v in full_cache]
            new_token, sequence = ids[:, T : T + 1], ids[:, : T + 1]
            for key, run in [
                ("cached", lambda: forward(model, new_token, cache, logits_to_keep=1)),  # noqa: B023
                ("uncached", lambda: forward(model, sequence, logits_to_keep=1)),  # noqa: B023
                ("uncached_all_logits", lambda: forward(model, sequence)),  # noqa: B023
            ]:
                timings[key].append(median_seconds(run))
        weights = list(model.parameters())  # wte once: lm_head is the same tensor
        timings["read_weights"] = median_seconds(lambda: [w.sum() for w in weights])
    return timings


# --8<-- [end:kv_timing]


def kv_timing() -> dict:
    """The measurement, taken once per version of the code that takes it and of the
    forward pass it times; the figure is drawn from the kept file."""
    sources = [
        inspect.getsource(median_seconds),
        inspect.getsource(measure_kv_timing),
        inspect.getsource(gpt2_by_hand),
        repr(TIMED_LENGTHS),
    ]
    return computed_once(
        "gpt2-kv-timing",
        [s.encode() for s in sources],
        lambda: measure_kv_timing(gpt2_by_hand.forward),
    )


@figure("gpt2-kv-cache-timing.svg", inputs=("snippets/gpt2_by_hand.py",))
def kv_cache_timing():
    timings = kv_timing()
    lengths = np.array(timings["lengths"])
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    lines = [
        ("uncached_all_logits", "without the cache, logits at every position", "#e65100", ":"),
        ("uncached", "without the cache, the next token's logits only", "#e65100", "-"),
        ("cached", "with the cache: the new token only", "#3f51b5", "-"),
    ]
    for key, label, colour, style in lines:
        ms = 1000 * np.array(timings[key])
        ax.plot(lengths, ms, marker="o", ls=style, color=colour, label=label, ms=4)
        ax.annotate(
            f"{ms[-1]:.0f} ms",
            (lengths[-1], ms[-1]),
            textcoords="offset points",
            xytext=(6, 0),
            va="center",
            fontsize=8,
            color=colour,
        )
    read_ms = 1000 * timings["read_weights"]
    ax.axhline(read_ms, color="#555555", lw=0.8, ls="--")
    ax.text(
        lengths[0],
        read_ms * 1.06,
        f"reading every weight once: {read_ms:.0f} ms",
        va="bottom",
        fontsize=8,
        color="#555555",
    )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.set_xlabel("tokens already in the sequence (T)")
    ax.set_ylabel("milliseconds for the next token")
    speedup = timings["uncached"][-1] / timings["cached"][-1]
    ax.set_title(
        f"GPT-2 124M, float32, CPU, {timings['threads']} threads: at "
        f"T = {lengths[-1]} the cache is {speedup:.0f}× faster",
        fontsize=9.5,
    )
    ax.legend(frameon=False, fontsize=8.5, loc="upper left")
    fig.tight_layout()
    return fig
