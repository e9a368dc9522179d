"""The figures of docs/assistant/grpo.md: a few groups' advantages, and short GRPO runs."""

import inspect

import matplotlib.pyplot as plt
import numpy as np

from snippets.book import computed_once
from snippets.figures import figure

SPEAKER_MODEL = "tensor-by-tensor/gpt2-shakespeare-speaker"
RUN = dict(steps=12, P=8, G=4, lr=2e-4, beta=0.04)  # the page's run
SEEDS = (0, 1, 2)  # training seeds
SAMPLING_SEEDS = (0, 1, 2)  # for the held-out mean reward


def _model_and_data():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from snippets.speaker_task import speaker_examples

    model = AutoModelForCausalLM.from_pretrained(SPEAKER_MODEL).eval()
    tokenizer = AutoTokenizer.from_pretrained(SPEAKER_MODEL)
    train, held_out, _ = speaker_examples(seed=0)
    return model, tokenizer, train, held_out


def _greedy(model, tokenizer, examples):
    """Greedy exact match, and the most frequent greedy answer with its share."""
    from collections import Counter

    from snippets.speaker_task import answers

    given = answers(model, tokenizer, [e["prompt"] for e in examples])
    right = sum(g == e["completion"].strip() for g, e in zip(given, examples, strict=True))
    top, count = Counter(given).most_common(1)[0]
    return {"exact_match": right / len(examples), "top": top, "top_share": count / len(given)}


def _state(model, tokenizer, train, held_out, sampling_seeds=SAMPLING_SEEDS):
    import torch

    from snippets.grpo import rewards_for

    rewards = []
    for seed in sampling_seeds:
        torch.manual_seed(seed)
        rewards.append(rewards_for(model, tokenizer, held_out, G=4)[1].mean().item())
    return {
        "reward": rewards,  # held out, 4 sampled answers each, one per sampling seed
        "held_out": _greedy(model, tokenizer, held_out),
        "train": _greedy(model, tokenizer, train),
    }


def measure_runs(seeds=SEEDS, run=RUN) -> dict:
    """For each training seed, the page's run from the SFT model: the training batches'
    mean reward and mean k3 per step; before and after it, the held-out mean reward of 4
    sampled answers per prompt (one value per sampling seed), and the greedy exact match
    and most frequent greedy answer on held-out and train prompts. With the majority
    answer's share of each split."""
    from collections import Counter

    import torch

    from snippets.grpo import grpo_train

    model, tokenizer, train, held_out = _model_and_data()
    majority = {}
    for split, examples in (("held_out", held_out), ("train", train)):
        name, count = Counter(e["completion"].strip() for e in examples).most_common(1)[0]
        majority[split] = {"name": name, "share": count / len(examples), "n": len(examples)}
    before = _state(model, tokenizer, train, held_out)
    runs = []
    for seed in seeds:
        model, tokenizer, train, held_out = _model_and_data()
        history = grpo_train(model, tokenizer, train, seed=seed, **run)
        runs.append(
            {
                "seed": seed,
                "reward": [r for r, _ in history],
                "kl": [kl for _, kl in history],
                "after": _state(model, tokenizer, train, held_out),
            }
        )
    return {
        "threads": torch.get_num_threads(),
        "majority": majority,
        "before": before,
        "runs": runs,
        "run": run,
    }


def runs() -> dict:
    """The measurement, taken once per version of the code it runs and of the checkpoint."""
    from snippets import grpo, hub, sft, speaker_task

    sources = [inspect.getsource(m) for m in (grpo, speaker_task, sft)]
    sources += [inspect.getsource(f) for f in (measure_runs, _state, _greedy)]
    sources += [repr((SEEDS, SAMPLING_SEEDS, RUN, hub.GPT2_SPEAKER.revision))]
    return computed_once("grpo-runs", [s.encode() for s in sources], measure_runs)


COLOURS = ("#3f51b5", "#e65100", "#00897b")


@figure("assistant-grpo-run.svg", inputs=("snippets/grpo.py", "snippets/speaker_task.py"))
def reward_and_kl_over_steps():
    measured = runs()
    fig, (reward_ax, kl_ax, held_ax) = plt.subplots(1, 3, figsize=(9.5, 2.9))
    for run, colour in zip(measured["runs"], COLOURS, strict=True):
        steps = np.arange(1, len(run["reward"]) + 1)
        label = f"seed {run['seed']}"
        reward_ax.plot(steps, run["reward"], color=colour, marker="o", markersize=3, label=label)
        kl_ax.plot(steps, run["kl"], color=colour, marker="o", markersize=3, label=label)
    reward_ax.set_title("mean reward of the batch", fontsize=9.5)
    kl_ax.set_title("mean k3 to the SFT model", fontsize=9.5)
    for ax in (reward_ax, kl_ax):
        ax.set_xlabel("step")
    reward_ax.legend(frameon=False, fontsize=8)
    before = measured["before"]
    for offset, (what, marker) in enumerate([("reward", "o"), ("exact_match", "s")]):
        for run, colour in zip(measured["runs"], COLOURS, strict=True):
            held_ax.plot(
                [0 + 2 * offset, 1 + 2 * offset],
                [_value(before, what), _value(run["after"], what)],
                color=colour,
                marker=marker,
                markersize=4,
            )
    held_ax.set_xticks([0, 1, 2, 3], ["before", "after", "before", "after"], fontsize=8)
    held_ax.set_xlim(-0.4, 3.4)
    held_ax.set_ylim(0, max(0.4, held_ax.get_ylim()[1]))
    held_ax.text(0.5, 0.02, "sampled\nmean reward", ha="center", fontsize=8)
    held_ax.text(2.5, 0.02, "greedy\nexact match", ha="center", fontsize=8)
    held_ax.set_title(f"held out, {measured['majority']['held_out']['n']} prompts", fontsize=9.5)
    fig.suptitle(
        f"GRPO from the SFT model: {RUN['steps']} steps, P = {RUN['P']} prompts, "
        f"G = {RUN['G']}, lr {RUN['lr']:g}, beta {RUN['beta']:g}",
        fontsize=10,
    )
    fig.tight_layout()
    return fig


@figure("assistant-grpo-advantages.svg", inputs=("snippets/grpo.py",))
def group_advantages_of_a_few_prompts():
    import torch

    from snippets.grpo import group_advantages

    G, right = 8, (0, 1, 2, 4, 6, 8)  # six groups: how many of their 8 answers are right
    P = len(right)
    rewards = torch.tensor([float(i < k) for k in right for i in range(G)])  # (P G,)
    shown = {
        "GRPO: (r - mean) / (std + eps)": group_advantages(rewards, G),
        "Dr. GRPO: r - mean": group_advantages(rewards, G, scale=False),
    }
    fig, axes = plt.subplots(2, 1, figsize=(8, 3.6), sharex=True)
    x = np.arange(P * G)
    colours = np.where(rewards.numpy() > 0, "#00897b", "#9e9e9e")
    for ax, (title, advantages) in zip(axes, shown.items(), strict=True):
        ax.bar(x, advantages.numpy(), color=colours, width=0.8)
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_title(title, fontsize=9.5)
        ax.set_ylabel("advantage")
        for p in range(1, P):
            ax.axvline(p * G - 0.5, color="#bdbdbd", linewidth=0.6, linestyle="--")
    axes[0].legend(
        handles=[
            plt.Rectangle((0, 0), 1, 1, color="#00897b", label="right: reward 1"),
            plt.Rectangle((0, 0), 1, 1, color="#9e9e9e", label="wrong: reward 0"),
        ],
        frameon=False,
        fontsize=8,
        loc="upper left",
    )
    axes[1].set_xticks(
        [p * G + (G - 1) / 2 for p in range(P)],
        [
            f"prompt {p + 1}\n{int(rewards[p * G : (p + 1) * G].sum())} of {G} right"
            for p in range(P)
        ],
        fontsize=8,
    )
    fig.tight_layout()
    return fig


def _value(state, what):
    """The held-out mean reward (over sampling seeds) or greedy exact match of a state."""
    if what == "reward":
        return float(np.mean(state["reward"]))
    return state["held_out"]["exact_match"]
