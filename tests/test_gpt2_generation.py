"""docs/gpt2/generation.md's generation loop by hand (snippets/decoding.py) picks the
tokens `model.generate` picks, setting by setting, and the page's three warning boxes
hold against transformers.

Each processor is compared with its transformers counterpart on random scores,
then `generate` with `model.generate` on the shipped GPT-2, greedy and sampled
under several seeds. `model.generate` gets every setting explicitly, so that no
default of its own (it samples from the top 50 unless told otherwise) applies.
"""

from itertools import pairwise

import pytest
import torch
from transformers import AutoTokenizer, GPT2LMHeadModel
from transformers.generation.logits_process import (
    NoRepeatNGramLogitsProcessor,
    RepetitionPenaltyLogitsProcessor,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from snippets.decoding import (
    ban_repeated_ngrams,
    generate,
    keep_top_k,
    keep_top_p,
    penalize_repetition,
)
from snippets.hub import GPT2_SHAKESPEARE

PROMPTS = ["PROSPERO.\n", "To be, or not to be", "O, wonder!"]


@pytest.fixture(scope="module")
def model():
    return GPT2LMHeadModel.from_pretrained(GPT2_SHAKESPEARE.repo_id).eval()


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(GPT2_SHAKESPEARE.repo_id)


def random_scores(seed, vocab=500):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(1, vocab, generator=generator) * 3  # (1, V)


END_OF_TEXT = 0  # <|endoftext|>: the shipped model's end-of-sequence token


def library_generate(model, ids, max_new_tokens, eos_token_id=END_OF_TEXT, **settings):
    """model.generate with every decoding setting spelled out."""
    explicit = {
        "do_sample": False,
        "temperature": 1.0,
        "top_k": 0,
        "top_p": 1.0,
        "repetition_penalty": 1.0,
        "no_repeat_ngram_size": 0,
    } | settings
    return model.generate(
        ids,
        max_new_tokens=max_new_tokens,
        eos_token_id=eos_token_id,
        pad_token_id=model.generation_config.pad_token_id,
        **explicit,
    )


@pytest.mark.parametrize("seed", range(20))
def test_top_p_equals_the_library(seed):
    scores = random_scores(seed)
    for p in (0.05, 0.3, 0.5, 0.9, 0.99):
        theirs = TopPLogitsWarper(top_p=p)(None, scores.clone())
        assert torch.equal(keep_top_p(scores, p), theirs)


def test_top_p_keeps_the_token_that_crosses_the_threshold():
    scores = torch.tensor([[3.0, 2.0, 1.0, 0.0, -1.0]])  # (1, V), already sorted
    probs = scores.softmax(dim=-1)
    top_two = probs[0, :2].sum().item()
    kept = lambda p: int(keep_top_p(scores, p).isfinite().sum())  # noqa: E731
    assert kept(probs[0, 0].item() / 2) == 1  # the first token alone crosses p
    assert kept(top_two - 1e-4) == 2  # the second token crosses p: it stays
    assert kept(top_two + 1e-4) == 3  # two are not enough: the third crosses p
    assert kept(1e-9) == 1  # the most likely token always stays
    for p in (top_two - 1e-4, top_two + 1e-4, 0.999):
        assert torch.equal(keep_top_p(scores, p), TopPLogitsWarper(top_p=p)(None, scores.clone()))


def test_top_p_removes_a_token_once_the_tokens_above_it_hold_exactly_p():
    scores = torch.tensor([[0.0, 0.0, 0.0, 0.0]])  # four tokens of exactly 0.25 each
    assert int(keep_top_p(scores, 0.5).isfinite().sum()) == 2
    assert int(keep_top_p(scores, 0.5000001).isfinite().sum()) == 3


def test_torch_sort_keeps_ties_in_order_on_a_short_row_and_not_on_a_vocabulary():
    """What generation.md's note on ties says of torch.sort."""
    assert torch.equal(torch.zeros(1, 4).sort().indices, torch.arange(4)[None])
    assert not torch.equal(torch.zeros(1, 4096).sort().indices, torch.arange(4096)[None])


@pytest.mark.parametrize(
    "scores",
    [
        torch.tensor([[0.458, 0.229, 0.229, 0.084]]).log(),  # the page's tie: token 2 stays
        torch.zeros(1, 1000),  # a block of ties longer than any small-sort path
        torch.randn(1, 4096, generator=torch.Generator().manual_seed(0)).round(decimals=1),
    ],
    ids=["two tied", "a thousand tied", "rounded scores, many ties"],
)
def test_top_p_keeps_the_same_tied_tokens_as_the_library(scores):
    for p in (0.1, 0.5, 0.6, 0.9):
        theirs = TopPLogitsWarper(top_p=p)(None, scores.clone())
        assert torch.equal(keep_top_p(scores, p), theirs), f"p = {p}"


@pytest.mark.parametrize("k", [1, 5, 50, 499, 500])
def test_top_k_equals_the_library(k):
    scores = random_scores(k)
    assert torch.equal(keep_top_k(scores, k), TopKLogitsWarper(top_k=k)(None, scores.clone()))


@pytest.mark.parametrize("penalty", [0.7, 1.2, 2.0])
def test_repetition_penalty_equals_the_library(penalty):
    """docs/gpt2/generation.md, warning "Dividing a negative score makes the token more
    likely": the penalty equals transformers', and one above 1 lowers the score of every
    seen token, whatever its sign."""
    scores = random_scores(7)
    generated = torch.tensor([[3, 17, 3, 400, 0, 17]])  # repeats count once
    theirs = RepetitionPenaltyLogitsProcessor(penalty)(generated, scores.clone())
    assert torch.equal(penalize_repetition(scores, generated, penalty), theirs)
    ours = penalize_repetition(scores, generated, penalty)
    for token in (3, 17, 400, 0):  # penalty > 1 lowers every seen logit, whatever its sign
        assert (ours[0, token] < scores[0, token]) == (penalty > 1)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_no_repeat_ngram_equals_the_library(n):
    generator = torch.Generator().manual_seed(n)
    generated = torch.randint(6, (1, 40), generator=generator)  # few symbols: many repeats
    scores = random_scores(n, vocab=6)
    theirs = NoRepeatNGramLogitsProcessor(n)(generated, scores.clone())
    assert torch.equal(ban_repeated_ngrams(scores, generated, n), theirs)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_equals_the_library(model, tokenizer, prompt):
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    ours = generate(model, ids, max_new_tokens=30, eos_token_id=END_OF_TEXT)
    assert torch.equal(ours, library_generate(model, ids, 30))
    uncached = generate(model, ids, max_new_tokens=30, eos_token_id=END_OF_TEXT, use_cache=False)
    assert torch.equal(ours, uncached)


SAMPLING = [
    {},
    {"temperature": 0.7},
    {"temperature": 1.5, "top_k": 20},
    {"top_k": 5},
    {"top_p": 0.9},
    {"top_p": 0.3},
    {"temperature": 0.8, "top_k": 40, "top_p": 0.95},
    {"repetition_penalty": 1.3},
    {"repetition_penalty": 0.8, "top_k": 50},
    {"no_repeat_ngram_size": 2},
    {"no_repeat_ngram_size": 3, "repetition_penalty": 1.2, "temperature": 0.9, "top_p": 0.8},
]


@pytest.mark.parametrize(
    "settings", SAMPLING, ids=lambda s: ",".join(map(str, s.items())) or "plain"
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sampling_equals_the_library_seed_for_seed(model, tokenizer, settings, seed):
    ids = tokenizer(PROMPTS[seed], return_tensors="pt")["input_ids"]
    torch.manual_seed(seed)
    ours = generate(
        model, ids, max_new_tokens=25, do_sample=True, eos_token_id=END_OF_TEXT, **settings
    )
    torch.manual_seed(seed)
    theirs = library_generate(model, ids, 25, do_sample=True, **settings)
    assert torch.equal(ours, theirs)


@pytest.mark.parametrize("seed", range(4))
def test_eos_stops_both_loops_at_the_same_token(model, tokenizer, seed):
    newline = tokenizer.convert_tokens_to_ids("Ċ")
    ids = tokenizer("PROSPERO.\nWhy, that's my spirit!", return_tensors="pt")["input_ids"]
    torch.manual_seed(seed)
    ours = generate(model, ids, max_new_tokens=60, do_sample=True, eos_token_id=newline)
    torch.manual_seed(seed)
    theirs = library_generate(model, ids, 60, do_sample=True, eos_token_id=newline)
    assert torch.equal(ours, theirs)
    assert ours[0, -1] == newline and (ours[0, ids.shape[1] : -1] != newline).all()
    assert ours.shape[1] - ids.shape[1] < 60


def test_max_length_counts_the_prompt_max_new_tokens_does_not(model, tokenizer):
    """docs/gpt2/generation.md, warning "`max_length` counts the prompt; unset `top_k` is not
    0": a tutorial's max_length=100 is 100 tokens in all, the prompt included."""
    ids = tokenizer("To be, or not to be, that is the question:", return_tensors="pt")["input_ids"]
    assert ids.shape[1] > 10
    by_length = model.generate(ids, max_length=20, do_sample=False, pad_token_id=0)
    by_new = model.generate(
        ids, max_new_tokens=20, do_sample=False, pad_token_id=0, eos_token_id=None
    )
    assert by_length.shape[1] == 20
    assert by_new.shape[1] == ids.shape[1] + 20


def test_no_repeat_ngram_size_2_forbids_every_repeated_pair(model, tokenizer):
    """docs/gpt2/generation.md, warning "`no_repeat_ngram_size=2` forbids every repeated pair
    of tokens": with it, no pair of tokens may ever come twice."""
    ids = tokenizer("PROSPERO.\n", return_tensors="pt")["input_ids"]
    plain = generate(model, ids, max_new_tokens=80)[0].tolist()
    banned = generate(model, ids, max_new_tokens=80, no_repeat_ngram_size=2)[0].tolist()
    plain_pairs, banned_pairs = list(pairwise(plain)), list(pairwise(banned))
    assert len(set(plain_pairs)) < len(plain_pairs)  # greedy text repeats itself
    assert len(set(banned_pairs)) == len(banned_pairs)


def test_model_generate_samples_from_the_top_50_unless_told(model, tokenizer):
    """docs/gpt2/generation.md, warning "`max_length` counts the prompt; unset `top_k` is not
    0": an unset top_k is not 0 in model.generate: it falls back to 50."""
    ids = tokenizer("O, wonder!", return_tensors="pt")["input_ids"]
    for seed in range(3):
        torch.manual_seed(seed)
        default = model.generate(ids, max_new_tokens=20, do_sample=True, pad_token_id=0)
        torch.manual_seed(seed)
        ours = generate(
            model, ids, max_new_tokens=20, do_sample=True, top_k=50, eos_token_id=END_OF_TEXT
        )
        assert torch.equal(default, ours)
