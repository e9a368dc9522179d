"""Greedy speculative decoding by hand (snippets/speculative.py) against the target's own
greedy decoding (`model.generate(do_sample=False)`) and transformers' assisted generation
(`generate(assistant_model=...)`), on inputs no page shows.

Prompts from across The Tempest (held out from training), every k from 1 to 8, drafts of
1, 2 and 3 blocks, generations that fill the 256 positions, a draft that is always right
(every round ends with the bonus token), a draft that is always wrong (every guess
rejected), an eos inside a run of accepted guesses, and a check that shares the draft's
blocks and cache, as LayerSkip does, counted by torch's FLOP counter. Token equalities are
exact; the draft's logits are float32 and proved within a tolerance 10× the largest
difference measured. The counts the page prints rest on argmaxes: a test pins that no top
two logits behind them are within rounding of each other.
"""

import copy
import re

import pytest
import torch
from transformers import DynamicCache, GPT2LMHeadModel

from snippets.speculative import (
    accept,
    accept_or_resample,
    chi_square_p_value,
    counts_from_output,
    distribution_after_the_rule,
    draft_agrees,
    early_exit_draft,
    greedy_decode,
    multiply_adds,
    propose,
    round_multiply_adds,
    speculative_decode,
)
from tools.pages import DOCS

pytestmark = pytest.mark.usefixtures("no_grad")

EOS = 0  # the checkpoint's eos_token_id, which generate stops at
PROMPT_LENGTH = 24
NEW_TOKENS = 40
PAGE_STARTS = range(4500, 34500, 5000)  # the page's windows of The Tempest, 32 tokens each
# the largest difference measured between the logits of one pass over a sequence and of
# token-by-token cached passes: 4e-5 (AMD EPYC, three numeric configurations); a swap of two
# logits needs both to move, so a gap over 10× twice that cannot close by rounding
GAP = 1e-3
LOGITS_ATOL = 2e-4  # the proofs below: 1.1e-5 measured at most (AMD EPYC, three configurations)


@pytest.fixture(scope="module")
def target(gpt2_shakespeare):
    return gpt2_shakespeare


@pytest.fixture(scope="module")
def prompts(tempest_ids):
    """Five prompts the page does not show: windows between the page's."""
    return [tempest_ids[:, s : s + PROMPT_LENGTH] for s in range(1700, 34000, 7300)]


@pytest.fixture(scope="module")
def drafts(target):
    return {L: early_exit_draft(target, L) for L in (1, 2, 3)}


@pytest.fixture(scope="module")
def references(target, prompts):
    """The target's own greedy output for each prompt, by transformers."""
    return [
        target.generate(p, max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=EOS)
        for p in prompts
    ]


def set_k(draft, k):
    draft.generation_config.num_assistant_tokens = k
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    draft.generation_config.assistant_confidence_threshold = 0.0


class Passes:
    """Counts a model's forward passes while in a `with` block."""

    def __init__(self, model):
        self.model, self.count = model, 0

    def __enter__(self):
        self.hook = self.model.register_forward_hook(self.add)
        return self

    def add(self, *args):
        self.count += 1

    def __exit__(self, *args):
        self.hook.remove()


@pytest.mark.parametrize("L", [1, 2, 3])
def test_the_draft_is_the_targets_first_blocks_then_its_ln_f_and_head(target, drafts, prompts, L):
    draft = drafts[L]
    mine = draft.state_dict()
    theirs = target.state_dict()
    assert mine.keys() == {
        k for k in theirs if not k.startswith("transformer.h.") or int(k.split(".")[2]) < L
    }
    assert all(torch.equal(tensor, theirs[name]) for name, tensor in mine.items())
    assert draft.lm_head.weight.data_ptr() == draft.transformer.wte.weight.data_ptr()  # tied
    assert not draft.training
    ids = torch.cat(prompts, dim=0)  # (5, 24)
    hidden = target(ids, output_hidden_states=True).hidden_states[L]  # after L blocks
    exit_logits = target.lm_head(target.transformer.ln_f(hidden))
    assert torch.equal(draft(ids).logits, exit_logits)  # the same operations, in one order


def test_greedy_by_hand_equals_generate(target, prompts, references):
    for prompt, reference in zip(prompts, references, strict=True):
        assert torch.equal(greedy_decode(target, prompt, NEW_TOKENS, eos_token_id=EOS), reference)


@pytest.mark.parametrize("k", range(1, 9))
def test_speculative_equals_the_targets_greedy_decoding(target, drafts, prompts, references, k):
    for prompt, reference in zip(prompts, references, strict=True):
        ours, counts = speculative_decode(target, drafts[3], prompt, NEW_TOKENS, k, EOS)
        assert torch.equal(ours, reference)
        assert counts["rounds"] + counts["accepted"] == ours.shape[1] - prompt.shape[1]


@pytest.mark.parametrize("L", [1, 2])
def test_speculative_equals_greedy_with_the_shallower_drafts(
    target, drafts, prompts, references, L
):
    for k in (1, 3, 8):
        ours, _ = speculative_decode(target, drafts[L], prompts[0], NEW_TOKENS, k, EOS)
        assert torch.equal(ours, references[0])


@pytest.mark.parametrize("k", range(1, 9))
def test_assisted_generation_gives_the_same_tokens_in_the_same_passes(
    target, drafts, prompts, references, k
):
    """transformers' assisted generation, k guesses per round, against the loop by hand: the
    same tokens, the same number of forward passes of the target and of the draft."""
    draft = drafts[3]
    set_k(draft, k)
    for prompt, reference in list(zip(prompts, references, strict=True))[:3]:
        with Passes(target) as target_passes, Passes(draft) as draft_passes:
            assisted = target.generate(
                prompt,
                max_new_tokens=NEW_TOKENS,
                do_sample=False,
                eos_token_id=EOS,
                assistant_model=draft,
            )
        with Passes(draft) as our_draft_passes:
            ours, counts = speculative_decode(target, draft, prompt, NEW_TOKENS, k, EOS)
        assert torch.equal(assisted, reference) and torch.equal(ours, reference)
        assert target_passes.count == counts["rounds"]
        assert draft_passes.count == our_draft_passes.count == counts["proposed"]


@pytest.mark.parametrize("k", [3, 8])
def test_generations_that_fill_the_context(target, drafts, tempest_ids, k):
    """From 40 tokens to all 256 positions: the last round's guesses stop at the limit."""
    prompt = tempest_ids[:, 20000:20040]
    new = target.config.n_positions - prompt.shape[1]  # 216
    reference = target.generate(prompt, max_new_tokens=new, do_sample=False, eos_token_id=None)
    assert reference.shape[1] == target.config.n_positions
    ours, _ = speculative_decode(target, drafts[3], prompt, new, k)
    assert torch.equal(ours, reference)
    set_k(drafts[3], k)
    assisted = target.generate(
        prompt, max_new_tokens=new, do_sample=False, eos_token_id=None, assistant_model=drafts[3]
    )
    assert torch.equal(assisted, reference)


@pytest.mark.parametrize("k", [1, 3, 7])
def test_a_draft_always_right_ends_every_round_with_the_bonus_token(target, prompts, k):
    """The target as its own draft: every guess is accepted, each round adds k + 1 tokens."""
    itself = early_exit_draft(target, target.config.n_layer)
    ours, counts = speculative_decode(target, itself, prompts[1], NEW_TOKENS, k)
    assert torch.equal(ours, greedy_decode(target, prompts[1], NEW_TOKENS))
    assert counts["accepted"] == counts["proposed"]
    assert counts["rounds"] == -(-NEW_TOKENS // (k + 1))  # ceil: the last round may be short


@pytest.mark.parametrize("k", [1, 4])
def test_a_draft_always_wrong_has_every_guess_rejected(target, prompts, k):
    """A draft that guesses its least likely token: each round adds only the target's."""
    contrary = early_exit_draft(target, 2)

    def least_likely_first(module, args, out):
        out.logits.neg_()  # in place: the output object stays

    contrary.register_forward_hook(least_likely_first)
    ours, counts = speculative_decode(target, contrary, prompts[2], NEW_TOKENS, k)
    assert torch.equal(ours, greedy_decode(target, prompts[2], NEW_TOKENS))
    assert counts["accepted"] == 0
    assert counts["rounds"] == NEW_TOKENS
    # near the end a round guesses only the tokens still missing, less one
    assert counts["proposed"] == sum(min(k, left - 1) for left in range(1, NEW_TOKENS + 1))


def test_an_eos_inside_a_run_of_accepted_guesses_stops_there(
    target, drafts, prompts, gpt2_tokenizer
):
    """A token the output holds, as eos: every loop stops just after its first occurrence,
    also when it is an accepted guess followed by more accepted guesses."""
    prompt = prompts[3]
    plain = greedy_decode(target, prompt, NEW_TOKENS)
    newline = gpt2_tokenizer("\n")["input_ids"][0]
    first = plain[0, prompt.shape[1] :].tolist().index(newline)  # a newline comes early
    reference = target.generate(
        prompt, max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=newline
    )
    assert reference.shape[1] == prompt.shape[1] + first + 1
    assert torch.equal(greedy_decode(target, prompt, NEW_TOKENS, eos_token_id=newline), reference)
    itself = early_exit_draft(target, target.config.n_layer)  # the eos comes mid-round
    for draft in (itself, drafts[3]):
        for k in range(1, 9):
            ours, counts = speculative_decode(target, draft, prompt, NEW_TOKENS, k, newline)
            assert torch.equal(ours, reference)
            assert counts["rounds"] + counts["accepted"] == ours.shape[1] - prompt.shape[1]


@pytest.mark.parametrize("L", [1, 2, 3])
def test_counts_from_the_output_alone_equal_the_loops(target, drafts, prompts, L):
    draft = drafts[L]
    for prompt in prompts[:2]:
        output = greedy_decode(target, prompt, NEW_TOKENS)
        agrees = draft_agrees(draft, output)
        for k in (1, 2, 3, 5, 8):
            _, counts = speculative_decode(target, draft, prompt, NEW_TOKENS, k)
            assert counts_from_output(agrees, prompt.shape[1], k) == counts


def test_accept_keeps_the_agreeing_prefix_then_the_targets_token():
    choices = torch.tensor([[5, 6, 7, 9]])
    for guesses, kept in [
        ([5, 6, 7], [5, 6, 7, 9]),
        ([5, 0, 7], [5, 6]),
        ([0, 6, 7], [5]),
        ([], [5]),
    ]:
        k = len(guesses)
        new = accept(torch.tensor([guesses], dtype=torch.long), choices[:, : k + 1])
        assert new.tolist() == [kept]


def smallest_deciding_gap(model, output, first):
    """The smallest gap between the two largest logits, at the positions that choose
    output[first:] and where one of the two is the token the output holds: where a swap of
    the two would change the model's pick, or whether the pick is the output's token."""
    logits = model(output[:, :-1]).logits[0, first - 1 :]  # (m - first, V)
    top = logits.topk(2, dim=-1)
    deciding = (top.indices == output[0, first:, None]).any(dim=-1)  # (m - first,)
    gaps = top.values[:, 0] - top.values[:, 1]
    return gaps[deciding].min().item()


def test_no_argmax_the_page_prints_is_within_rounding_of_a_tie(
    target, drafts, gpt2_tokenizer, tempest_ids
):
    """The page's outputs and counts are argmaxes of float32 logits: wherever a swap of the
    top two would change a token or a count, the top logit beats the next by more than 10×
    the tolerance within which the logits are proved, so every CPU picks the same."""
    prompt = gpt2_tokenizer("PROSPERO.\n", return_tensors="pt")["input_ids"]
    runs = [(prompt, 40)] + [(tempest_ids[:, s : s + 32], 48) for s in PAGE_STARTS]
    for ids, new in runs:
        output = greedy_decode(target, ids, new)
        assert smallest_deciding_gap(target, output, ids.shape[1]) > GAP
        for draft in drafts.values():  # the draft's picks on the output decide the counts
            assert smallest_deciding_gap(draft, output, ids.shape[1]) > GAP
    for L in (1, 2, 3, 4):  # the page's 12 tokens of each draft alone
        model = early_exit_draft(target, L)
        output = greedy_decode(model, prompt, 12)
        assert smallest_deciding_gap(model, output, prompt.shape[1]) > GAP


def test_the_positions_follow_the_cache_length(prove, target, prompts):
    """The page: after a crop, GPT-2 numbers the new tokens from the cache's length."""
    prompt = prompts[4]
    cache = DynamicCache(config=target.config)
    target(prompt, past_key_values=cache, use_cache=True)
    cache.crop(-5)  # as after a rejection: 19 positions left
    new = prompt[:, 19:]  # (1, 5)
    implicit = target(new, past_key_values=cache, use_cache=True).logits
    cache.crop(-5)
    explicit = target(
        new, past_key_values=cache, use_cache=True, position_ids=torch.arange(19, 24)[None]
    ).logits
    assert torch.equal(implicit, explicit)
    whole = target(prompt).logits[:, 19:]  # (1, 5, V)
    prove(
        "cached pass after crop(-5)",
        "one pass over the whole prompt",
        "a Tempest prompt of 24 tokens",
        implicit,
        whole,
        LOGITS_ATOL,
    )


def test_assistant_confidence_threshold_cuts_rounds_short_by_default(target, drafts, prompts):
    """The page: without assistant_confidence_threshold = 0, the default 0.4 stops the draft
    before k guesses, so transformers' rounds are not those of the loop by hand."""
    draft = early_exit_draft(target, 3)  # a fresh generation config
    draft.generation_config.num_assistant_tokens = 6
    with Passes(draft) as passes:
        out = target.generate(
            prompts[0],
            max_new_tokens=NEW_TOKENS,
            do_sample=False,
            eos_token_id=EOS,
            assistant_model=draft,
        )
    ours, counts = speculative_decode(target, draft, prompts[0], NEW_TOKENS, 6, EOS)
    assert torch.equal(out, ours)
    assert passes.count < counts["proposed"]


def test_warning_dynamiccache_crop_takes_how_many_to_remove_as_a_negative_number(target):
    cache = DynamicCache(config=target.config)
    target(torch.arange(10)[None], past_key_values=cache, use_cache=True)
    with pytest.raises(ValueError, match="negative"):
        cache.crop(6)  # transformers 4: keep 6 positions
    cache.crop(0)  # transformers 4: keep none
    assert cache.get_seq_length() == 10
    cache.crop(-4)
    assert cache.get_seq_length() == 6
    assert all(layer.keys.shape[2] == 6 == layer.values.shape[2] for layer in cache.layers)


@pytest.mark.parametrize("context", [0, 40, 255])
def test_multiply_adds_counts_what_a_cached_pass_multiplies(target, context):
    """The page's costs hold on any machine because they are counts: torch's FLOP counter,
    on one token's cached pass through the draft of L blocks (L = 4: the target), counts
    twice multiply_adds(config, L, context)."""
    from torch.utils.flop_counter import FlopCounterMode

    prompt = torch.arange(context)[None]  # (1, context)
    for L in (1, 2, 3, 4):
        model = early_exit_draft(target, L) if target.config.n_layer > L else target
        cache = DynamicCache(config=model.config)
        if context:
            model(prompt, past_key_values=cache, use_cache=True)
        with FlopCounterMode(display=False) as counter:
            model(torch.tensor([[7]]), past_key_values=cache, use_cache=True)
        assert counter.get_total_flops() == 2 * multiply_adds(model.config, L, context), L


def upper_blocks(target, L):
    """A GPT2LMHeadModel of the target's blocks L .. N - 1, then its ln_f and head, that
    reads the stream after block L - 1 as inputs_embeds: its position embeddings are zeros,
    so it adds nothing to them (GPT-2 adds positions only at the input)."""
    config = copy.deepcopy(target.config)
    config.n_layer = target.config.n_layer - L
    upper = GPT2LMHeadModel(config).eval()
    state = {}
    for name, tensor in target.state_dict().items():
        if name.startswith("transformer.h."):
            block = int(name.split(".")[2])
            if block >= L:
                state[name.replace(f"h.{block}.", f"h.{block - L}.", 1)] = tensor
        else:
            state[name] = tensor
    state["transformer.wpe.weight"] = torch.zeros_like(state["transformer.wpe.weight"])
    upper.load_state_dict(state)
    return upper


@pytest.mark.parametrize("L", [1, 2, 3])
def test_a_shared_check_skips_the_first_blocks_for_all_but_the_last_guess(
    prove, target, prompts, L
):
    """LayerSkip's sharing, run: the draft of L blocks keeps the stream after its block
    L - 1 and its cache (the target's for those blocks); the check runs only the k-th guess
    through blocks 0 .. L - 1, then the k + 1 tokens through the rest. Its logits are the
    target's check's, and torch's FLOP counter counts the multiply-adds round_multiply_adds
    says it saves: k passes of the first L blocks, every query of the check counted against
    all the keys of the pass, as the fixture's eager attention computes them (SDPA's kernels
    count otherwise)."""
    from torch.utils.flop_counter import FlopCounterMode

    k, prompt = 4, prompts[0]  # (1, 24): the cache holds 23 tokens, the round starts at 24
    context = prompt.shape[1] - 1
    draft, upper = early_exit_draft(target, L), upper_blocks(target, L)
    streams = []  # the stream after block L - 1, as the draft's ln_f receives it
    draft.transformer.ln_f.register_forward_pre_hook(lambda module, args: streams.append(args[0]))
    lower_cache, upper_cache = DynamicCache(config=draft.config), DynamicCache(config=upper.config)
    draft.transformer(prompt[:, :-1], past_key_values=lower_cache, use_cache=True)
    upper(inputs_embeds=streams.pop(), past_key_values=upper_cache, use_cache=True)
    guesses = propose(draft, prompt, lower_cache, k)  # (1, k); streams: k tokens, (1, 1, C)
    with FlopCounterMode(display=False) as shared:
        draft.transformer(guesses[:, -1:], past_key_values=lower_cache, use_cache=True)
        stream = torch.cat(streams, dim=1)  # (1, k + 1, C)
        logits = upper(inputs_embeds=stream, past_key_values=upper_cache, use_cache=True).logits
    cache = DynamicCache(config=target.config)
    target(prompt[:, :-1], past_key_values=cache, use_cache=True)
    checked = torch.cat([prompt[:, -1:], guesses], dim=1)  # (1, k + 1)
    with FlopCounterMode(display=False) as whole:
        reference = target(checked, past_key_values=cache, use_cache=True).logits
    prove(
        f"shared check, draft of {L} block{'s' * (L != 1)}",
        "the target's check of the same tokens",
        "a Tempest prompt of 24 tokens, k = 4",
        logits,
        reference,
        LOGITS_ATOL,
    )
    # each query of either check meets all context + k + 1 keys, as multiply_adds counts a
    # token with context + k tokens in the cache
    config, N, cached = target.config, target.config.n_layer, context + k
    blocks = multiply_adds(config, L, cached) - multiply_adds(config, 0, cached)  # L B
    assert whole.get_total_flops() == 2 * (k + 1) * multiply_adds(config, N, cached)
    assert shared.get_total_flops() == 2 * ((k + 1) * multiply_adds(config, N - L, cached) + blocks)
    saved = whole.get_total_flops() - shared.get_total_flops()
    assert saved == 2 * k * blocks
    assert saved == 2 * (
        round_multiply_adds(config, L, k, cached, shared=False)
        - round_multiply_adds(config, L, k, cached, shared=True)
    )


def test_per_new_token_sharing_leaves_the_draft_only_its_head(target):
    """The page's shares per new token are (k c + k + 1) / E without sharing and
    (k h + k + 1) / E with it, h the head's share: both above 1, since E <= k + 1 (α from
    0 to 0.99, k from 1 to 8)."""
    config, target_work = target.config, multiply_adds(target.config, 4, 40)
    h = multiply_adds(config, 0, 40) / target_work
    for L in (1, 2, 3):
        c = multiply_adds(config, L, 40) / target_work
        for k in range(1, 9):
            alone = round_multiply_adds(config, L, k, 40, shared=False) / target_work
            shared = round_multiply_adds(config, L, k, 40, shared=True) / target_work
            assert alone == pytest.approx(k * c + k + 1, rel=1e-12)
            assert shared == pytest.approx(k * h + k + 1, rel=1e-12)
            for alpha in (0.0, 0.21, 0.48, 0.99):
                tokens = (1 - alpha ** (k + 1)) / (1 - alpha)  # E <= k + 1
                assert shared / tokens > 1 and alone / tokens > shared / tokens


def test_the_prose_quotes_the_shares_as_the_page_prints_them(target):
    page = " ".join((DOCS / "efficient" / "speculative-decoding.md").read_text().split())
    work = [
        multiply_adds(target.config, L, 40) / multiply_adds(target.config, 4, 40) for L in range(4)
    ]
    head, one, two, three = (f"{share:.0%}" for share in work)
    assert f"0 blocks: {head} of the target's multiply-adds" in page
    assert f"does less than {head} of the target's work" in page
    assert f"do {one} and {two} of its work" in page
    assert f"3 blocks: {three} of the target's multiply-adds" in page
    assert page.count(f"does {three} of the target's") == 2  # a bullet and a paragraph
    assert f"against `c` = {work[1]:.2f}, {work[2]:.2f} and {work[3]:.2f}" in page
    assert f"`h` being the head's share ({head}, printed above)" in page


def test_the_prose_reads_the_sharing_table_as_the_page_prints_it():
    """Per new token, with sharing and without: every share printed above 1, sharing's the
    lower, and the best k the one the prose names."""
    text = (DOCS / "efficient" / "speculative-decoding.md").read_text()
    rows = re.findall(
        r"^\d blocks? +(\d\.\d\d) at k = (\d) +(\d\.\d\d) at k = (\d)$", text, re.MULTILINE
    )
    prose = " ".join(text.split())
    assert len(rows) == 3
    assert all(1 < float(shared) < float(alone) for alone, _, shared, _ in rows)
    assert "Sharing lowers the count but leaves it above 1" in prose
    assert {k for _, k, _, _ in rows} | {k for _, _, _, k in rows} == {"1"}
    assert "The best `k` is 1 for every draft, with sharing or without" in prose
    assert "Every guess raises the count; the target alone, at 1, does least" in prose


def test_the_prose_quotes_alpha_as_the_page_prints_it():
    """The prose quotes each draft's α from the page's table, and the bullet on the draft
    of 3 blocks the α / (1 − α) that follows from it."""
    text = (DOCS / "efficient" / "speculative-decoding.md").read_text()
    alphas = re.findall(r"^\d  (0\.\d\d)  counted", text, re.MULTILINE)
    prose = " ".join(text.split())
    assert len(alphas) == 3 and f"here α is {alphas[0]}, {alphas[1]} and {alphas[2]}" in prose
    bound = float(alphas[2]) / (1 - float(alphas[2]))
    assert f"α = {alphas[2]}, keeps fewer than α / (1 − α) = {bound:.2f}" in prose


def random_distributions(generator, size, zeros):
    """p and q (size,) in float64, each with `zeros` tokens of probability 0."""
    p, q = torch.rand(2, size, generator=generator, dtype=torch.float64)
    p[torch.randperm(size, generator=generator)[:zeros]] = 0
    q[torch.randperm(size, generator=generator)[:zeros]] = 0
    return p / p.sum(), q / q.sum()


@pytest.mark.parametrize("zeros", [0, 1, 3])
def test_the_rule_gives_the_targets_distribution_exactly(zeros):
    """Enumerated over the draft's proposals, on 7 tokens in float64, including tokens one
    side never picks, p = q, and p and q with no token in common. Rounding measured:
    1.7e-16 at most; tolerance 1e-15."""
    generator = torch.Generator().manual_seed(zeros)
    cases = [random_distributions(generator, 7, zeros) for _ in range(20)]
    disjoint = torch.tensor([0.5, 0.5, 0, 0, 0, 0, 0], dtype=torch.float64)
    cases += [(cases[0][0], cases[0][0]), (disjoint, disjoint.roll(3))]
    for p, q in cases:
        assert torch.allclose(distribution_after_the_rule(p, q), p, rtol=0, atol=1e-15)


def test_the_sampled_rule_follows_its_exact_distribution():
    """accept_or_resample, drawn 200,000 times on 7 tokens, keeps each guess x at the rate
    min(1, p(x) / q(x)) and gives tokens that pass the χ² test against p; its draws with
    the residual replaced by p fail it, so the test can tell."""
    generator = torch.Generator().manual_seed(5)
    p, q = random_distributions(generator, 7, 1)
    guesses = torch.multinomial(q, 200_000, replacement=True, generator=generator)
    tokens, kept = accept_or_resample(p.float(), q.float(), guesses, generator)
    for x in guesses.unique():
        rate = kept[guesses == x].float().mean().item()
        assert abs(rate - min(1.0, (p[x] / q[x]).item())) < 0.01, x  # 4.7σ at worst
    assert chi_square_p_value(tokens, p) > 1e-3
    wrong = torch.where(
        kept, guesses, torch.multinomial(p, len(guesses), replacement=True, generator=generator)
    )
    assert chi_square_p_value(wrong, p) < 1e-6


def test_chi_square_bins_expect_at_least_five_each():
    """scipy's χ² test on the bins the rule for small expectations gives: tokens expected
    under 5 times pooled, and the pool, when it too expects under 5, merged into the
    smallest bin; a token p never gives, drawn, fails outright."""
    from scipy.stats import chisquare

    cases = [  # p, counts of its 200 draws, and the bins scipy gets: observed, expected
        (
            [0.3, 0.25, 0.2, 0.15, 0.05, 0.02, 0.02, 0.01, 0.0],
            [58, 52, 41, 29, 12, 3, 3, 2, 0],
            [58, 52, 41, 29, 12, 8],
            [60, 50, 40, 30, 10, 10],
        ),  # a pool expecting 10
        (
            [0.3, 0.25, 0.2, 0.15, 0.08, 0.01, 0.01, 0.0],
            [64, 45, 44, 30, 9, 5, 3, 0],
            [64, 45, 44, 30, 17],
            [60, 50, 40, 30, 20],
        ),  # a pool expecting 4, merged
    ]
    for p, counts, observed, expected in cases:
        p = torch.tensor(p, dtype=torch.float64)
        tokens = torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts))
        theirs = chisquare(observed, expected).pvalue
        assert chi_square_p_value(tokens, p) == pytest.approx(theirs, rel=1e-9)
    never_seven = torch.tensor(cases[1][0], dtype=torch.float64)  # p(7) = 0
    assert chi_square_p_value(torch.tensor([0, 1, 7]), never_seven) == 0.0
    two = torch.tensor([0.9, 0.1], dtype=torch.float64)  # 40 draws: one bin, and a pool of 4
    for tokens in (torch.zeros(40, dtype=torch.long), torch.zeros(3, dtype=torch.long)):
        with pytest.raises(ValueError, match="too few draws"):
            chi_square_p_value(tokens, two)


@pytest.mark.parametrize("L", [1, 2, 3])
def test_speculative_sampling_on_the_books_gpt2_draws_from_the_target(target, drafts, prompts, L):
    """The next token after prompts the page does not show, 20,000 draws through the rule
    from each draft's proposals: the χ² test cannot tell them from the target's p."""
    generator = torch.Generator().manual_seed(L)
    for prompt in prompts[:2]:
        p = target(prompt).logits[0, -1].softmax(dim=-1)
        q = drafts[L](prompt).logits[0, -1].softmax(dim=-1)
        guesses = torch.multinomial(q, 20_000, replacement=True, generator=generator)
        tokens, _ = accept_or_resample(p, q, guesses, generator)
        assert chi_square_p_value(tokens, p) > 1e-3
        assert chi_square_p_value(guesses, p) < 1e-6  # the test tells q's draws from p's
