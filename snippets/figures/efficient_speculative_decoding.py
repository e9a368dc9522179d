"""Figures of docs/efficient/speculative-decoding.md: tokens per second, and one pass's time."""

import inspect

import matplotlib.pyplot as plt
import numpy as np

from snippets import speculative
from snippets.book import computed_once, cpu_name
from snippets.figures import figure

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
