"""The generation loop by hand: from next-token logits to text, one token at a time.

Each decoding setting is a small function on the scores of the next token, applied
in the order transformers applies them: repetition penalty, no-repeat-ngram, then,
when sampling, temperature, top-k and top-p. `generate` runs the loop; sampling
draws with torch.multinomial from the global torch generator, as `model.generate`
does, so that after the same torch.manual_seed both pick the same tokens.

One function, `next_token_logits`, is all `generate` knows of the model: GPT-2
models go through our forward pass by hand (snippets/gpt2_by_hand.py) and its
cache; any other causal LM through its own forward and its own cache. The loop
does not care which.

docs/gpt2/generation.md, kv-cache.md and smollm2.md include these sections;
tests/test_gpt2_generation.py proves `generate` equal to `model.generate`.
Shapes: T tokens so far, V vocabulary size; the batch is one sequence.
"""

import torch

from snippets.gpt2_by_hand import forward


# --8<-- [start:processors]
# --8<-- [start:temperature]
def apply_temperature(scores, temperature):
    """Below 1 the distribution sharpens towards the top token; above 1 it flattens."""
    return scores / temperature


# --8<-- [end:temperature]
# --8<-- [start:top_k]
def keep_top_k(scores, k):
    """Keep the k highest scores (and any tied with the k-th); the rest get -inf."""
    kth_best = scores.topk(k).values[..., -1:]  # (1, 1)
    return scores.masked_fill(scores < kth_best, float("-inf"))


# --8<-- [end:top_k]
# --8<-- [start:top_p]
def keep_top_p(scores, p):
    """Nucleus: keep the most likely tokens until their probabilities add up to p.

    As transformers does it: sort from the least likely up, and remove each token that,
    with every token below it, holds 1 - p or less. The token that crosses p stays, and
    tied tokens are ranked in the order torch.sort gives them.
    """
    ordered, order = scores.sort(dim=-1)  # (1, V) each, the least likely first
    mass_up_to = ordered.softmax(dim=-1).cumsum(dim=-1)  # (1, V): each token and all below
    remove = mass_up_to <= 1 - p
    remove[..., -1] = False  # the most likely token always stays
    return scores.masked_fill(remove.scatter(-1, order, remove), float("-inf"))


# --8<-- [end:top_p]
# --8<-- [start:repetition_penalty]
def penalize_repetition(scores, generated, penalty):
    """Make every token already in `generated` less likely (penalty > 1).

    As transformers does it: a positive logit is divided by the penalty, a
    negative one multiplied by it, so both move down. scores: (1, V).
    """
    seen = scores.gather(-1, generated)  # (1, T): the logit of each token seen so far
    seen = torch.where(seen < 0, seen * penalty, seen / penalty)
    return scores.scatter(-1, generated, seen)


# --8<-- [end:repetition_penalty]
# --8<-- [start:ngrams]
def ban_repeated_ngrams(scores, generated, n):
    """Forbid any token that would repeat an n-gram already in `generated`."""
    tokens = generated[0].tolist()
    if len(tokens) + 1 < n:  # too short to complete any n-gram yet
        return scores
    last = tokens[len(tokens) - n + 1 :]  # the n - 1 tokens the next one would extend
    banned = [
        tokens[i + n - 1] for i in range(len(tokens) - n + 1) if tokens[i : i + n - 1] == last
    ]
    banned = torch.tensor(banned, dtype=torch.long, device=scores.device)
    return scores.index_fill(-1, banned, float("-inf"))


# --8<-- [end:ngrams]


# --8<-- [end:processors]


# --8<-- [start:generate]
def next_token_logits(model, new_ids, cache):
    """Run the model on the new tokens after the cached ones: (logits (1, T, V), cache)."""
    if model.config.model_type == "gpt2":
        return forward(model, new_ids, cache)  # our forward pass by hand, our cache
    out = model(new_ids, past_key_values=cache, use_cache=True)  # any other causal LM
    return out.logits, out.past_key_values


@torch.no_grad()
def generate(
    model,
    input_ids,
    max_new_tokens,
    do_sample=False,
    temperature=1.0,
    top_k=0,
    top_p=1.0,
    repetition_penalty=1.0,
    no_repeat_ngram_size=0,
    eos_token_id=None,
    use_cache=True,
):
    """Extend input_ids (1, T) by up to max_new_tokens tokens; stop after eos_token_id."""
    ids = input_ids  # (1, T): the prompt, then every token chosen so far
    new_ids, cache = ids, None  # with the cache, only the newest token is run each step
    for _ in range(max_new_tokens):
        if use_cache:
            logits, cache = next_token_logits(model, new_ids, cache)
        else:  # recompute the whole sequence every step
            logits, _ = next_token_logits(model, ids, None)
        scores = logits[:, -1].float()  # (1, V): the scores of the next token
        if repetition_penalty != 1.0:
            scores = penalize_repetition(scores, ids, repetition_penalty)
        if no_repeat_ngram_size > 0:
            scores = ban_repeated_ngrams(scores, ids, no_repeat_ngram_size)
        if do_sample:
            if temperature != 1.0:
                scores = apply_temperature(scores, temperature)
            if top_k > 0:
                scores = keep_top_k(scores, top_k)
            if top_p < 1.0:
                scores = keep_top_p(scores, top_p)
            next_id = torch.multinomial(scores.softmax(dim=-1), num_samples=1)  # (1, 1)
        else:
            next_id = scores.argmax(dim=-1, keepdim=True)  # (1, 1): greedy
        ids = torch.cat([ids, next_id], dim=1)  # (1, T + 1)
        new_ids = next_id
        if eos_token_id is not None and next_id.item() == eos_token_id:
            break
    return ids


# --8<-- [end:generate]


# --8<-- [start:beam_search]
def reorder(cache, beams):
    """Keep, in every layer's (keys, values), the rows of the beams that go on."""
    return [(keys[beams], values[beams]) for keys, values in cache]


@torch.no_grad()
def beam_search(
    model,
    input_ids,
    num_beams,
    max_new_tokens,
    length_penalty=1.0,
    early_stopping=False,
    eos_token_id=None,
):
    """The most likely continuation of input_ids (1, T) that num_beams running guesses find.

    A hypothesis ends with eos_token_id or at max_new_tokens; its score is its summed
    log-probability divided by (tokens generated) ** length_penalty. Returns the best
    finished hypothesis, (1, T').
    """
    K = num_beams
    beams = input_ids.expand(K, -1)  # (K, T): K copies of the prompt to start
    scores = torch.full((K,), float("-inf"))  # (K,): each beam's summed log-probability
    scores[0] = 0.0  # one beam at first, so that the K copies don't pick the same tokens
    finished = []  # (score, ids (1, T')) of the best ended hypotheses, at most K
    new_ids, cache = beams, None
    for step in range(1, max_new_tokens + 1):
        logits, cache = forward(model, new_ids, cache, logits_to_keep=1)  # (K, 1, V)
        log_probs = logits[:, -1].float().log_softmax(dim=-1)  # (K, V)
        V = log_probs.shape[-1]
        candidates = (scores[:, None] + log_probs).view(-1)  # (K V,): every beam, every token
        # 2K candidates, so that K are left to go on even if K of them end here
        top_scores, top = candidates.topk(2 * K)  # (2K,) each, best first
        origin, token = top // V, top % V  # (2K,) each: which beam, which next token
        extended = torch.cat([beams[origin], token[:, None]], dim=1)  # (2K, T + 1)
        ends = torch.full_like(token, step == max_new_tokens, dtype=torch.bool)  # (2K,)
        if eos_token_id is not None:
            ends |= token == eos_token_id
        for i in range(K):  # only the K best candidates may end: the rest are spares
            if ends[i]:
                finished.append(((top_scores[i] / step**length_penalty).item(), extended[i]))
        finished = sorted(finished, key=lambda hypothesis: -hypothesis[0])[:K]
        going_on = (~ends).nonzero()[:K, 0]  # (K,): the best candidates that did not end
        if len(going_on) == 0:  # every candidate reached max_new_tokens
            break
        beams, scores = extended[going_on], top_scores[going_on]  # (K, T + 1), (K,)
        cache = reorder(cache, origin[going_on])
        new_ids = token[going_on, None]  # (K, 1): only the new tokens go through the model
        if len(finished) == K:
            if early_stopping is True:
                break
            # could the best running beam still beat the worst finished hypothesis?
            length = max_new_tokens if early_stopping == "never" and length_penalty > 0 else step
            if (scores[0] / length**length_penalty).item() <= finished[-1][0]:
                break
    return finished[0][1][None]  # (1, T')


# --8<-- [end:beam_search]


# --8<-- [start:generate_batch]
@torch.no_grad()
def generate_batch(
    model, input_ids, attention_mask, max_new_tokens, eos_token_id=None, pad_token_id=None
):
    """Greedy continuations of B prompts at once, padded on the left: (B, T) -> (B, T').

    attention_mask is 1 on real tokens and 0 on padding. A row that has produced
    eos_token_id gets pad_token_id from then on; the loop stops when every row has.
    """
    ids = input_ids  # (B, T): the prompts, then every token chosen so far
    # each prompt's first real token is position 0, however much padding precedes it
    positions = (attention_mask.cumsum(dim=-1) - 1).clamp(min=0)  # (B, T)
    finished = torch.zeros(ids.shape[0], dtype=torch.bool)  # (B,)
    new_ids, cache = ids, None
    for _ in range(max_new_tokens):
        out = model(
            new_ids,
            attention_mask=attention_mask,
            position_ids=positions[:, -new_ids.shape[1] :],
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        cache = out.past_key_values
        next_id = out.logits[:, -1].argmax(dim=-1)  # (B,)
        if eos_token_id is not None:
            next_id = next_id.masked_fill(finished, pad_token_id)
            finished |= next_id == eos_token_id
        new_ids = next_id[:, None]  # (B, 1)
        ids = torch.cat([ids, new_ids], dim=1)  # (B, T + 1)
        attention_mask = torch.cat([attention_mask, torch.ones_like(new_ids)], dim=1)  # (B, T + 1)
        positions = torch.cat([positions, positions[:, -1:] + 1], dim=1)  # (B, T + 1)
        if finished.all():
            break
    return ids


# --8<-- [end:generate_batch]
