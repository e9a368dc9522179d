"""Figures of Part III, GPT-2 from logits to text (docs/gpt2/)."""

import inspect
import statistics
import time

import matplotlib.pyplot as plt
import numpy as np

from snippets import decoding, gpt2_by_hand
from snippets.book import computed_once, read_json
from snippets.figures import figure
from snippets.hub import GPT2_SHAKESPEARE

METRICS = GPT2_SHAKESPEARE.trained_here / "metrics.json"
WEIGHTS = GPT2_SHAKESPEARE.trained_here / "model.safetensors"
PROMPT = "KING.\nWhat say you, my lord? Shall we"  # the prompt of docs/gpt2/generation.md
LINE = "Full fathom five thy father lies"  # a line of the held-out play


def shipped_model(**options):
    from transformers import AutoTokenizer, GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(GPT2_SHAKESPEARE.repo_id, **options).eval()
    return model, AutoTokenizer.from_pretrained(GPT2_SHAKESPEARE.repo_id)


@figure("gpt2-training-loss.svg", inputs=(METRICS,))
def training_loss():
    metrics = read_json(METRICS)
    train = np.array(metrics["train_loss"])
    steps = np.arange(1, len(train) + 1)
    window = 50
    smooth = np.convolve(train, np.ones(window) / window, mode="valid")
    held = metrics["held_out"]
    fig, (per_token, per_char) = plt.subplots(1, 2, figsize=(9.5, 3.6))
    per_token.plot(steps, train, color="#c5cae9", lw=0.8, label="training batch")
    per_token.plot(
        steps[window - 1 :],
        smooth,
        color="#3f51b5",
        lw=1.6,
        label=f"training, mean of {window} steps",
    )
    per_token.plot(
        [e["step"] for e in held],
        [e["nats_per_token"] for e in held],
        "o-",
        color="#e65100",
        ms=4,
        label="held-out play",
    )
    per_token.set_ylim(
        bottom=min(smooth.min(), held[-1]["nats_per_token"]) - 0.3,
        top=held[1]["nats_per_token"] + 1.0,
    )
    per_token.set_xlabel("training step")
    per_token.set_ylabel("loss (nats per token)")
    per_token.legend(frameon=False, fontsize=8)
    per_char.plot(
        [e["step"] for e in held], [e["nats_per_char"] for e in held], "o-", color="#e65100", ms=4
    )
    per_char.axhline(1.5, color="#555555", ls="--", lw=1)
    per_char.text(0, 1.5, " the bar: 1.5", va="bottom", fontsize=8, color="#555555")
    per_char.set_ylim(1.2, held[1]["nats_per_char"] + 0.3)
    per_char.set_xlabel("training step")
    per_char.set_ylabel("held-out loss (nats per character)")
    final = held[-1]
    per_char.annotate(
        f"{final['nats_per_char']:.3f}",
        (final["step"], final["nats_per_char"]),
        textcoords="offset points",
        xytext=(-10, 8),
        ha="right",
        fontsize=8,
    )
    fig.tight_layout()
    return fig


@figure("gpt2-forward-attention.svg", inputs=(WEIGHTS,))
def forward_attention():
    import torch

    model, tokenizer = shipped_model(attn_implementation="eager")
    ids = tokenizer(LINE, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        attentions = model(ids, output_attentions=True).attentions  # L × (1, H, T, T)
    tokens = [t.replace("Ġ", "·") for t in tokenizer.convert_ids_to_tokens(ids[0])]
    layers, heads = len(attentions), attentions[0].shape[1]
    fig, axes = plt.subplots(layers, heads, figsize=(2.1 * heads, 2.1 * layers))
    for layer, row in enumerate(axes):
        for head, ax in enumerate(row):
            ax.imshow(attentions[layer][0, head].numpy(), cmap="Blues", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            if layer == 0:
                ax.set_title(f"head {head}", fontsize=9)
            if head == 0:
                ax.set_ylabel(f"layer {layer}", fontsize=9)
    for ax in axes[-1]:
        ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=6.5)
    for ax in axes[:, 0]:
        ax.set_yticks(range(len(tokens)), tokens, fontsize=6.5)
    fig.supxlabel("key (the token read)", fontsize=9)
    fig.supylabel("query (the token reading)", fontsize=9)
    fig.tight_layout()
    return fig


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


# --8<-- [start:median_seconds]
def median_seconds(run, repeats=5):
    """The median of `repeats` timed runs of `run()`, after one untimed run."""
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# --8<-- [end:median_seconds]


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
