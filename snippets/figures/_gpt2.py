"""The book's GPT-2 and a timer, for the figures of several chapters of docs/gpt2/."""

import statistics
import time

from snippets.hub import GPT2_SHAKESPEARE

WEIGHTS = GPT2_SHAKESPEARE.trained_here / "model.safetensors"


def shipped_model(**options):
    from transformers import AutoTokenizer, GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(GPT2_SHAKESPEARE.repo_id, **options).eval()
    return model, AutoTokenizer.from_pretrained(GPT2_SHAKESPEARE.repo_id)


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
