"""Reinforcement learning with a verifiable reward: GRPO by hand.

docs/assistant/grpo.md includes the sections marked below and runs them;
tests/test_assistant_grpo.py proves them equal to TRL's GRPOTrainer.
"""

# --8<-- [start:sample]
import copy

import torch


@torch.no_grad()
def sample_groups(model, tokenizer, prompts, G, max_completion_length=7, temperature=1.0):
    """P prompts -> the batch GRPO learns from, each prompt G times in a row, named as TRL's
    GRPOTrainer names it: prompt_ids and prompt_mask (P G, T_p), padded on the left;
    completion_ids and completion_mask (P G, T_c), the mask 1 up to and including the
    first end-of-text token, the ids after it end-of-text too. Each token is drawn from
    softmax(logits / temperature), with the model's own key-value cache, at positions
    counted from each row's first real token, as generate counts them."""
    tokenizer.padding_side = "left"  # every prompt ends in the last column
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    eos = tokenizer.eos_token_id
    batch = tokenizer(prompts, return_tensors="pt", padding=True)  # (P, T_p)
    positions = (batch["attention_mask"].cumsum(dim=1) - 1).clamp(min=0)  # (P, T_p)
    out = model(**batch, position_ids=positions, use_cache=True, logits_to_keep=1)
    rows = torch.arange(len(prompts)).repeat_interleave(G)  # (P G,): 0 G times, 1 G times...
    out.past_key_values.reorder_cache(rows)  # each prompt's keys and values, G copies
    logits = out.logits[rows, -1]  # (P G, V)
    prompt_ids, prompt_mask = batch["input_ids"][rows], batch["attention_mask"][rows]  # (P G, T_p)
    mask, tokens = prompt_mask, []
    for t in range(max_completion_length):
        probs = torch.softmax(logits / temperature, dim=-1)  # (P G, V)
        tokens.append(torch.multinomial(probs, 1))  # (P G, 1)
        mask = torch.cat([mask, torch.ones_like(tokens[-1])], dim=1)  # (P G, T_p + t + 1)
        if t + 1 == max_completion_length or torch.cat(tokens, 1).eq(eos).any(1).all():
            break
        out = model(
            input_ids=tokens[-1],
            attention_mask=mask,
            position_ids=mask.sum(dim=1, keepdim=True) - 1,  # (P G, 1): the new token's
            past_key_values=out.past_key_values,
        )
        logits = out.logits[:, -1]
    completion_ids = torch.cat(tokens, dim=1)  # (P G, T_c)
    is_eos = completion_ids.eq(eos).int()
    after_eos = (is_eos.cumsum(dim=1) - is_eos) > 0  # (P G, T_c): past the first end-of-text
    return {
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "completion_ids": completion_ids.masked_fill(after_eos, eos),
        "completion_mask": (~after_eos).int(),
    }


# --8<-- [end:sample]


# --8<-- [start:reward]
def exact_match_reward(completions, speaker, **kwargs):
    """A reward function as TRL calls one: the completions' texts and the data set's
    `speaker` column -> 1.0 where the first line, stripped, is the speaker's name, else 0.0."""
    return [float(c.split("\n")[0].strip() == s) for c, s in zip(completions, speaker, strict=True)]


# --8<-- [end:reward]


# --8<-- [start:advantages]
def group_advantages(rewards, G, scale=True, eps=1e-4):
    """rewards (P G,), G in a row per prompt -> advantages (P G,): each reward minus the
    mean of its group; divided by the group's standard deviation plus eps when `scale`
    (GRPO), not divided (Dr. GRPO). TRL's eps is 1e-4; its std, torch's, divides by G - 1."""
    grouped = rewards.view(-1, G)  # (P, G)
    advantages = grouped - grouped.mean(dim=1, keepdim=True)  # (P, G)
    if scale:
        advantages = advantages / (grouped.std(dim=1, keepdim=True) + eps)
    return advantages.flatten()  # (P G,)


# --8<-- [end:advantages]


# --8<-- [start:logps]
def per_token_logps(model, inputs, temperature=1.0, positions_from_mask=False):
    """log π(o_t | q, o_<t) of each completion token under `model`: (B, T_c), 0 where the
    completion mask is 0. The model sees the prompt and completion as one row; with no
    position ids, as TRL 1.16 calls it, a left-padded row is read at shifted positions;
    `positions_from_mask` counts them from each row's first real token, as generate does."""
    completion_ids, completion_mask = inputs["completion_ids"], inputs["completion_mask"]
    input_ids = torch.cat([inputs["prompt_ids"], completion_ids], dim=1)  # (B, T_p + T_c)
    attention_mask = torch.cat([inputs["prompt_mask"], completion_mask], dim=1)
    T_c = completion_ids.shape[1]
    positions = (attention_mask.cumsum(dim=1) - 1).clamp(min=0) if positions_from_mask else None
    logits = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=positions,
        logits_to_keep=T_c + 1,
    ).logits
    logits = logits[:, :-1] / temperature  # (B, T_c, V): position t predicts token t + 1
    logps = logits.log_softmax(dim=-1).gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)
    return logps.masked_fill(completion_mask == 0, 0.0)  # (B, T_c)


# --8<-- [end:logps]


# --8<-- [start:loss]
def k3(logps, ref_logps):
    """The k3 estimator of KL(π_θ ‖ π_ref), per token: r - log r - 1 with r = π_ref / π_θ,
    at tokens sampled from π_θ. Never negative; 0 where the two agree."""
    log_r = ref_logps - logps
    return torch.exp(log_r) - log_r - 1


def grpo_loss(
    logps,
    inputs,
    loss_type="dapo",
    beta=0.0,
    epsilon=0.2,
    epsilon_high=None,
    max_completion_length=None,
    kl_times_ratio=True,
):
    """logps (B, T_c) under the model being trained, and the batch's completion_mask
    (B, T_c), advantages (B,), old_per_token_logps and, when beta > 0,
    ref_per_token_logps (B, T_c) -> the loss TRL's GRPOTrainer computes for `loss_type`.
    The ratio ρ = π_θ / π_old is clipped to [1 - epsilon, 1 + epsilon_high]; the KL
    term is k3, times ρ when `kl_times_ratio` (TRL's use_bias_correction_kl)."""
    mask = inputs["completion_mask"]
    A = inputs["advantages"].unsqueeze(1)  # (B, 1): one advantage for all of a completion
    ratio = torch.exp(logps - inputs["old_per_token_logps"])  # ρ, (B, T_c)
    high = epsilon if epsilon_high is None else epsilon_high
    if loss_type == "cispo":  # the ratio clipped and detached, times the log-probability
        per_token = -ratio.clamp(max=high).detach() * A * logps
    elif loss_type == "sapo":  # a soft gate in place of the clip, TRL's temperatures
        tau = torch.where(A > 0, 1.0, 1.05)
        per_token = -torch.sigmoid(tau * (ratio - 1)) * 4 / tau * A
    else:  # PPO's clipped objective, negated to be minimized: (B, T_c)
        per_token = -torch.min(ratio * A, ratio.clamp(1 - epsilon, 1 + high) * A)
    if beta != 0.0:
        kl = k3(logps, inputs["ref_per_token_logps"])  # (B, T_c)
        per_token = per_token + beta * (kl * ratio if kl_times_ratio else kl)
    per_token = per_token * mask  # tokens after the end-of-text count for nothing
    if loss_type in ("grpo", "sapo"):  # each completion's mean over its tokens, then over B
        return (per_token.sum(dim=1) / mask.sum(dim=1)).mean()
    if loss_type in ("bnpo", "dapo", "cispo"):  # the mean over all the batch's tokens
        return per_token.sum() / mask.sum()
    if loss_type == "dr_grpo":  # the sum over tokens, divided by a constant
        return per_token.sum() / (per_token.shape[0] * max_completion_length)
    raise ValueError(f"unknown loss_type {loss_type!r}")


# --8<-- [end:loss]


# --8<-- [start:train]
def rewards_for(model, tokenizer, examples, G, **sampling):
    """Sample G completions for each example's prompt -> (the batch, rewards (P G,))."""
    batch = sample_groups(model, tokenizer, [e["prompt"] for e in examples], G, **sampling)
    texts = tokenizer.batch_decode(batch["completion_ids"], skip_special_tokens=True)
    speaker = [e["completion"].strip() for e in examples for _ in range(G)]  # (P G,)
    return batch, torch.tensor(exact_match_reward(texts, speaker))


def grpo_train(model, tokenizer, examples, steps, P=8, G=4, lr=1e-4, beta=0.04, seed=0, **loss):
    """`steps` steps of GRPO on `examples`, P of them per step, G completions each, one
    AdamW step per batch: π_old is the model that sampled, so ρ = 1 in value.
    `loss` goes to grpo_loss (loss_type "dapo", TRL's default, unless given). The
    log-probabilities count positions from each row's first real token, as the sampler.
    -> [(mean reward, mean k3 to the start), one per step]."""
    torch.manual_seed(seed)
    reference = copy.deepcopy(model).requires_grad_(False)  # π_ref: the model as it starts
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    order = torch.randperm(len(examples)).tolist()
    positions = dict(positions_from_mask=True)  # as the sampler reads them
    history = []
    for step in range(steps):
        chosen = [examples[order[(step * P + i) % len(examples)]] for i in range(P)]
        batch, rewards = rewards_for(model, tokenizer, chosen, G)
        batch["advantages"] = group_advantages(rewards, G)  # (P G,)
        with torch.no_grad():
            batch["ref_per_token_logps"] = per_token_logps(reference, batch, **positions)
        logps = per_token_logps(model, batch, **positions)  # (P G, T_c), with gradients
        batch["old_per_token_logps"] = logps.detach()
        optimizer.zero_grad()
        grpo_loss(logps, batch, beta=beta, **loss).backward()
        optimizer.step()
        mask = batch["completion_mask"]
        kl = (k3(logps.detach(), batch["ref_per_token_logps"]) * mask).sum() / mask.sum()
        history.append((rewards.mean().item(), kl.item()))
    return history


# --8<-- [end:train]
