"""Greedy speculative decoding by hand: a draft proposes k tokens, the target checks them
all in one forward pass with its KV cache, and the output is the target's own greedy
output, token for token.

The draft is the target's own first layers, then its final LayerNorm and its tied head
(self-speculation): no second checkpoint, the same tokenizer by construction.

With sampling, the rejection rule of speculative sampling at one position, the exact
distribution it gives, and Pearson's χ² test of draws against a distribution.

docs/efficient/speculative-decoding.md includes the sections marked below;
tests/test_efficient_speculative_decoding.py proves the loop equal to the target's greedy
decoding and to `model.generate(assistant_model=...)`, and tests the rule's tokens against
the target's distribution. Shapes: the batch is one sequence;
n tokens so far, k guesses per round, a of them accepted, V vocabulary size.
"""

import copy

import torch
from transformers import DynamicCache, GPT2LMHeadModel


# --8<-- [start:draft]
def early_exit_draft(target, L):
    """A GPT2LMHeadModel of the target's first L blocks, then the target's final
    LayerNorm ln_f and its head (tied to wte): every tensor a copy of the target's."""
    config = copy.deepcopy(target.config)
    config.n_layer = L
    draft = GPT2LMHeadModel(config).eval()  # eval: no dropout, as from_pretrained gives
    kept = {  # blocks h.0 .. h.(L - 1); wte, wpe, ln_f and the head as they are
        name: tensor
        for name, tensor in target.state_dict().items()
        if not name.startswith("transformer.h.") or int(name.split(".")[2]) < L
    }
    draft.load_state_dict(kept)  # strict: every tensor of the draft comes from the target
    return draft


# --8<-- [end:draft]


# --8<-- [start:greedy]
@torch.no_grad()
def greedy_decode(model, input_ids, max_new_tokens, eos_token_id=None):
    """Greedy decoding, one forward pass per new token, with the model's KV cache.
    input_ids (1, n) -> (1, n + max_new_tokens), fewer if eos_token_id comes first."""
    ids, cache = input_ids, DynamicCache(config=model.config)
    new = ids  # the tokens the cache has not seen: the prompt, then one at a time
    for _ in range(max_new_tokens):
        logits = model(new, past_key_values=cache, use_cache=True).logits  # (1, len(new), V)
        new = logits[:, -1:].argmax(dim=-1)  # (1, 1)
        ids = torch.cat([ids, new], dim=1)
        if new.item() == eos_token_id:
            break
    return ids


# --8<-- [end:greedy]


# --8<-- [start:propose]
def propose(draft, ids, cache, k):
    """k greedy tokens of the draft after ids (1, n), as (1, k). The cache holds the draft's
    keys and values of the first cache.get_seq_length() tokens of ids; it runs the rest."""
    new = ids[:, cache.get_seq_length() :]  # (1, n - cached): usually 1 or 2 tokens
    guesses = [ids[:, :0]]  # (1, 0): none yet
    for _ in range(k):
        logits = draft(new, past_key_values=cache, use_cache=True).logits  # (1, len(new), V)
        new = logits[:, -1:].argmax(dim=-1)  # (1, 1)
        guesses.append(new)
    return torch.cat(guesses, dim=1)  # (1, k); the cache now holds n + k - 1 tokens


# --8<-- [end:propose]


# --8<-- [start:accept]
def accept(guesses, choices):
    """guesses (1, k): the draft's; choices (1, k + 1): the target's argmax at the same
    positions and one more. Returns the new tokens, (1, a + 1): the a guesses that agree,
    up to the first that does not, then the target's own token (its bonus if a == k)."""
    agree = (guesses == choices[:, : guesses.shape[1]])[0].long()  # (k,): 1 where equal
    a = int(agree.cumprod(dim=0).sum())  # cumprod: 0 from the first mismatch on
    return choices[:, : a + 1]  # the accepted guesses are the target's choices too


# --8<-- [end:accept]


# --8<-- [start:speculative]
@torch.no_grad()
def speculative_decode(target, draft, input_ids, max_new_tokens, k, eos_token_id=None):
    """Greedy decoding of `target`, with k tokens guessed by `draft` in each round.
    Returns the ids, (1, n + max_new_tokens), fewer if eos_token_id comes first, and the
    counts: rounds (forward passes of the target), proposed and accepted guesses. A round
    ends with one token of the target's, or with an eos among its accepted guesses, which
    then counts as that token: rounds + accepted is the number of new tokens."""
    ids, end = input_ids, input_ids.shape[1] + max_new_tokens  # ids: (1, n)
    target_cache = DynamicCache(config=target.config)
    draft_cache = DynamicCache(config=draft.config)
    counts = {"rounds": 0, "proposed": 0, "accepted": 0}
    while ids.shape[1] < end:
        k_now = min(k, end - ids.shape[1] - 1)  # a round adds up to k_now + 1 tokens
        guesses = propose(draft, ids, draft_cache, k_now)  # (1, k_now)
        # one pass of the target over what its cache lacks (the prompt in the first round,
        # then the newest token) and the guesses
        checked = torch.cat([ids[:, target_cache.get_seq_length() :], guesses], dim=1)
        logits = target(checked, past_key_values=target_cache, use_cache=True).logits
        choices = logits[:, -(k_now + 1) :].argmax(dim=-1)  # (1, k_now + 1)
        new = accept(guesses, choices)  # (1, a + 1)
        if eos_token_id in new[0].tolist():  # stop after eos, as generate does
            new = new[:, : new[0].tolist().index(eos_token_id) + 1]
        counts["rounds"] += 1
        counts["proposed"] += k_now
        counts["accepted"] += new.shape[1] - 1  # the guesses kept before the round's last
        ids = torch.cat([ids, new], dim=1)  # (1, n + a + 1)
        # each cache keeps the tokens that stay, all but the newest, which no model has run;
        # crop takes how many tokens to remove, as a negative number
        for cache in (target_cache, draft_cache):
            cache.crop(min(0, ids.shape[1] - 1 - cache.get_seq_length()))
        if new[0, -1].item() == eos_token_id:
            break
    return ids, counts


# --8<-- [end:speculative]


# --8<-- [start:counts]
@torch.no_grad()
def draft_agrees(draft, output):
    """output (1, m): the target's greedy output. Returns m - 1 booleans: [t - 1] is
    whether the draft, run on output[:, :t], picks output[0, t]. One forward pass."""
    picks = draft(output[:, :-1]).logits.argmax(dim=-1)  # (1, m - 1): a pick after each
    return (picks == output[:, 1:])[0].tolist()


def counts_from_output(agrees, prompt_length, k):
    """The counts speculative_decode gives for k, from draft_agrees of its output alone."""
    counts = {"rounds": 0, "proposed": 0, "accepted": 0}
    t, end = prompt_length, len(agrees) + 1  # t: the first token this round adds
    while t < end:
        k_now = min(k, end - t - 1)  # as in speculative_decode
        a = 0  # guess a of the round stands at token t + a, and is the draft's pick there
        while a < k_now and agrees[t + a - 1]:
            a += 1
        counts["rounds"] += 1
        counts["proposed"] += k_now
        counts["accepted"] += a
        t += a + 1
    return counts


# --8<-- [end:counts]


# --8<-- [start:multiply_adds]
def multiply_adds(config, blocks, context):
    """Multiply-adds of one token's cached pass through the first `blocks` blocks and
    the head, `context` tokens in the cache. Per block: 12 C² for the weights
    (attention's four C × C, the MLP's C × 4C and 4C × C), and C for each key and
    each value read. Then the head's V × C. LayerNorm, GELU and softmax are left
    out: O(C) and O(H × context) each."""
    C, V = config.n_embd, config.vocab_size
    return blocks * (12 * C * C + 2 * (context + 1) * C) + V * C


# --8<-- [end:multiply_adds]


# --8<-- [start:round_multiply_adds]
def round_multiply_adds(config, L, k, context, shared):
    """Multiply-adds of one round with the draft of L blocks, each token counted as one
    pass with `context` tokens in the cache: the draft's k passes, then the target's check
    of k + 1 tokens. Shared, as in LayerSkip: the check takes the draft's outputs of the
    first L blocks, and their cache, for every token but the k-th guess, which the draft
    never ran; k tokens skip those L blocks."""
    draft = k * multiply_adds(config, L, context)
    check = (k + 1) * multiply_adds(config, config.n_layer, context)
    blocks = multiply_adds(config, L, context) - multiply_adds(config, 0, context)  # L B
    return draft + check - k * blocks if shared else draft + check


# --8<-- [end:round_multiply_adds]


# --8<-- [start:sampling]
def accept_or_resample(p, q, guesses, generator=None):
    """Speculative sampling's rule at one position: p and q (V,) the target's and the
    draft's distributions there, guesses (N,) N independent draws from q. Keeps a guess x
    with probability min(1, p(x) / q(x)); in place of a rejected one, draws a token from
    max(0, p - q), renormalised. Returns the tokens (N,) and which guesses were kept."""
    # u < p(x) / q(x), u uniform in [0, 1): a token the target never picks is never kept
    kept = torch.rand(guesses.shape, generator=generator) * q[guesses] < p[guesses]
    residual = (p - q).clamp(min=0)  # (V,); all zero only if p = q (to rounding): all kept
    if not residual.any():
        return guesses, kept
    # multinomial renormalises; one draw per guess, used where the guess was rejected
    fallback = torch.multinomial(residual, len(guesses), replacement=True, generator=generator)
    return torch.where(kept, guesses, fallback), kept


def distribution_after_the_rule(p, q):
    """The exact distribution (V,) of the token the rule gives, enumerating the draft's
    proposals x, each drawn with probability q(x): kept with min(1, p(x) / q(x)), else
    replaced by a draw from max(0, p - q), renormalised."""
    residual = (p - q).clamp(min=0)
    replacement = residual / residual.sum() if residual.any() else torch.zeros_like(p)
    out = torch.zeros_like(p)
    for x in range(len(p)):
        if q[x] == 0:
            continue  # never proposed
        keep = min(1.0, (p[x] / q[x]).item())
        out[x] += q[x] * keep
        out += q[x] * (1 - keep) * replacement
    return out


def chi_square_p_value(tokens, p):
    """Pearson's χ² test that tokens (N,) were drawn from p (V,): the probability of a χ²
    this large or larger if they were. Tokens expected fewer than 5 times share one bin,
    itself merged into the smallest other bin if it too expects fewer than 5."""
    counts, expected = torch.bincount(tokens, minlength=len(p)).double(), len(tokens) * p.double()
    if counts[expected == 0].sum() > 0:  # a token p never gives
        return 0.0
    often = expected >= 5
    observed, rare = counts[often], counts[~often].sum()
    expected, rare_expected = expected[often], expected[~often].sum()
    if rare_expected >= 5 or len(expected) == 0:
        observed = torch.cat([observed, rare[None]])
        expected = torch.cat([expected, rare_expected[None]])
    else:  # none, or too few to stand alone
        smallest = expected.argmin()
        observed[smallest] += rare
        expected[smallest] += rare_expected
    if len(observed) < 2:
        raise ValueError("fewer than 2 bins expect 5 draws: too few draws for a χ² test")
    chi2 = ((observed - expected) ** 2 / expected).sum()
    degrees = torch.tensor(len(observed) - 1, dtype=torch.float64)
    return torch.special.gammaincc(degrees / 2, chi2 / 2).item()


# --8<-- [end:sampling]
