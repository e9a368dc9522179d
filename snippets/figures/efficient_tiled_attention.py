"""Figures of docs/efficient/tiled-attention.md: attention's memory and time, naive and tiled."""

import inspect

import matplotlib.pyplot as plt
import matplotlib.ticker as ticker
import numpy as np

from snippets import tiled_attention
from snippets.book import computed_once
from snippets.figures import figure

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
