"""The figures of docs/assistant/dpo.md: a short DPO run at three learning rates."""

import inspect

import matplotlib.pyplot as plt

from snippets.book import computed_once
from snippets.figures import figure

RATES = (1e-5, 3e-5, 1e-4)
STEPS, EVERY = 16, 2


def dpo_runs() -> dict:
    """The page's run (STEPS steps of 4 training pairs from the SFT model, beta 0.1) at each
    rate in RATES, the held-out pairs and exact match scored every EVERY steps; kept in
    .cache/ under a hash of this code, of the snippets it runs and of the SFT model's
    revision."""
    from snippets import dpo, sft, speaker_task
    from snippets.hub import GPT2_SPEAKER

    sources = [inspect.getsource(module) for module in (dpo, sft, speaker_task)]
    sources += [inspect.getsource(run_at), repr((RATES, STEPS, EVERY)), GPT2_SPEAKER.revision]
    return computed_once("dpo-runs", [s.encode() for s in sources], lambda: run_at(RATES))


def run_at(rates) -> dict:
    import copy

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from snippets.dpo import SFT_MODEL, pair_logps, preference_pairs, train_dpo
    from snippets.speaker_task import answers, exact_match, speaker_examples

    train, held_out, speakers = speaker_examples(seed=0)
    train = train[: STEPS * 4]
    tokenizer = AutoTokenizer.from_pretrained(SFT_MODEL)
    reference = AutoModelForCausalLM.from_pretrained(SFT_MODEL).requires_grad_(False)
    given_train = answers(reference, tokenizer, [e["prompt"] for e in train])
    given_held_out = answers(reference, tokenizer, [e["prompt"] for e in held_out])
    train_pairs = preference_pairs(train, given_train, speakers, seed=0)
    held_out_pairs = preference_pairs(held_out, given_held_out, speakers, seed=1)
    ref_chosen, ref_rejected = pair_logps(reference, tokenizer, held_out_pairs)
    runs = {}
    for lr in rates:
        policy = copy.deepcopy(reference).requires_grad_(True)
        curve = []

        def score(step, policy=policy, curve=curve):
            if step % EVERY:
                return
            chosen, rejected = pair_logps(policy, tokenizer, held_out_pairs)
            chosen_ratio, rejected_ratio = chosen - ref_chosen, rejected - ref_rejected
            curve.append(
                {
                    "step": step,
                    "chosen": chosen_ratio.mean().item(),
                    "rejected": rejected_ratio.mean().item(),
                    "accuracy": (chosen_ratio > rejected_ratio).float().mean().item(),
                    "exact match": exact_match(policy, tokenizer, held_out),
                }
            )

        score(0)
        torch.manual_seed(0)
        train_dpo(policy, reference, tokenizer, train_pairs, steps=STEPS, lr=lr, after=score)
        runs[f"{lr:g}"] = curve
    return runs


COLOURS = ("#3f51b5", "#e65100", "#00897b")


@figure(
    "assistant-dpo.svg", inputs=("snippets/dpo.py", "snippets/sft.py", "snippets/speaker_task.py")
)
def dpo_at_three_rates():
    runs = dpo_runs()
    fig, axes = plt.subplots(1, 3, figsize=(9, 2.8))
    by_rate = sorted(runs.items(), key=lambda run: float(run[0]))  # JSON keeps keys sorted
    for (lr, curve), colour in zip(by_rate, COLOURS, strict=True):
        steps = [point["step"] for point in curve]
        label = f"{float(lr):.0e}"
        axes[0].plot(steps, [p["chosen"] for p in curve], "-o", color=colour, ms=3, label=label)
        axes[0].plot(steps, [p["rejected"] for p in curve], "--o", color=colour, ms=3)
        axes[1].plot(steps, [p["accuracy"] for p in curve], "-o", color=colour, ms=3)
        axes[2].plot(steps, [p["exact match"] for p in curve], "-o", color=colour, ms=3)
    titles = (
        "log-ratio to the reference\n(chosen solid, rejected dashed)",
        "reward accuracy",
        "exact match",
    )
    for ax, title in zip(axes, titles, strict=True):
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("DPO step")
        ax.set_xticks(range(0, STEPS + 1, EVERY))
    axes[0].axhline(0, color="grey", lw=0.5)
    axes[0].legend(title="learning rate", fontsize=7, title_fontsize=7, frameon=False)
    fig.suptitle("Held-out pairs and exact match over the run, from the SFT model", fontsize=10)
    fig.tight_layout()
    return fig
