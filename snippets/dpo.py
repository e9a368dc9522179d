"""Preference tuning: DPO by hand

The code docs/assistant/dpo.md includes, which tests/test_assistant_dpo.py proves equal
to TRL's DPOTrainer. It starts from the supervised fine-tuning chapter's model and task
(snippets/sft.py, snippets/speaker_task.py).
"""

import random

import torch
import torch.nn.functional as F

from snippets.sft import IGNORE, sft_batch

SFT_MODEL = "tensor-by-tensor/gpt2-shakespeare-speaker"  # the SFT chapter's model, shipped


# --8<-- [start:pairs]


def preference_pairs(examples, given, speakers, seed=0):
    """Prompt-completion dicts and the model's greedy answers to them -> preference pairs
    {"prompt", "chosen", "rejected"}: chosen the right speaker; rejected the model's own
    answer where it names another speaker, else a speaker drawn with `seed`."""
    draw = random.Random(seed)
    pairs = []
    for example, answer in zip(examples, given, strict=True):
        right = example["completion"].strip()
        if answer == right or answer not in speakers:
            answer = draw.choice([s for s in speakers if s != right])
        pairs.append({"prompt": example["prompt"], "chosen": f" {right}", "rejected": f" {answer}"})
    return pairs


# --8<-- [end:pairs]


# --8<-- [start:dpo_batch]
def dpo_batch(tokenizer, pairs):
    """B pairs -> input_ids, attention_mask and labels, each (2B, T): the B chosen
    sequences, then the B rejected, each prompt + answer + end-of-text, as the SFT chapter
    builds them (labels IGNORE outside the answer and its end-of-text)."""
    chosen = [{"prompt": p["prompt"], "completion": p["chosen"]} for p in pairs]
    rejected = [{"prompt": p["prompt"], "completion": p["rejected"]} for p in pairs]
    return sft_batch(tokenizer, chosen + rejected)


# --8<-- [end:dpo_batch]


# --8<-- [start:sequence_logps]
def sequence_logps(logits, labels):
    """logits (N, T, V), labels (N, T) -> (N,): for each sequence, the sum over its answer's
    tokens (labels not IGNORE) of log p(token | the tokens before it)."""
    log_probs = logits[:, :-1].log_softmax(-1)  # (N, T - 1, V): position t predicts t + 1
    targets = labels[:, 1:]  # (N, T - 1)
    counted = targets != IGNORE  # (N, T - 1)
    picked = log_probs.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # (N, T - 1)
    return picked.where(counted, 0).sum(-1)  # (N,)


# --8<-- [end:sequence_logps]


# --8<-- [start:dpo_loss]
def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    """Four (B,) sequence log-probabilities -> the DPO loss (a number), and the implicit
    rewards of the chosen and of the rejected answers, each (B,)."""
    chosen_logratios = policy_chosen - ref_chosen  # (B,): log π(y_c|x) - log π_ref(y_c|x)
    rejected_logratios = policy_rejected - ref_rejected  # (B,)
    losses = -F.logsigmoid(beta * (chosen_logratios - rejected_logratios))  # (B,)
    chosen_rewards = beta * chosen_logratios.detach()  # (B,)
    rejected_rewards = beta * rejected_logratios.detach()  # (B,)
    return losses.mean(), chosen_rewards, rejected_rewards


# --8<-- [end:dpo_loss]


# --8<-- [start:logps_of]
def logps_of(model, batch):
    """(2B,) sequence log-probabilities of a dpo_batch under `model`, split into the
    chosen (B,) and the rejected (B,)."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    return sequence_logps(logits, batch["labels"]).chunk(2)  # (2B,) -> (B,), (B,)


# --8<-- [end:logps_of]


# --8<-- [start:pair_logps]
@torch.no_grad()
def pair_logps(model, tokenizer, pairs, batch_size=16):
    """logps_of for many pairs, `batch_size` pairs at a time, each batch padded only to its
    own longest row: the chosen (B,) and the rejected (B,) log-probabilities."""
    chosen, rejected = [], []
    for start in range(0, len(pairs), batch_size):
        batch = dpo_batch(tokenizer, pairs[start : start + batch_size])
        batch_chosen, batch_rejected = logps_of(model, batch)
        chosen.append(batch_chosen)
        rejected.append(batch_rejected)
    return torch.cat(chosen), torch.cat(rejected)  # (B,), (B,)


# --8<-- [end:pair_logps]


# --8<-- [start:train_dpo]
def train_dpo(
    policy, reference, tokenizer, pairs, steps, batch_size=4, lr=3e-5, beta=0.1, after=None
):
    """`steps` AdamW steps of DPO on `pairs`, in order, `batch_size` pairs a step, and each
    step's loss. The reference is frozen: its log-probabilities are computed once, first.
    `after(step)`, if given, is called after each step."""
    batches = [
        dpo_batch(tokenizer, pairs[start : start + batch_size])
        for start in range(0, steps * batch_size, batch_size)
    ]
    with torch.no_grad():
        ref_logps = [logps_of(reference, batch) for batch in batches]  # (B,), (B,) each
    optimizer = torch.optim.AdamW(policy.parameters(), lr=lr)
    losses = []  # the model's dropout is 0: train and eval mode compute the same
    for step, (batch, ref) in enumerate(zip(batches, ref_logps, strict=True), 1):
        loss, _, _ = dpo_loss(*logps_of(policy, batch), *ref, beta)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if after:
            after(step)
    return losses


# --8<-- [end:train_dpo]
