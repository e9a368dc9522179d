"""docs/gpt2/beam-search.md: `beam_search` and `generate_batch` (snippets/decoding.py) pick
the tokens `model.generate` picks, on prompts, settings and a model size the page does not
show, and the page's warning box holds.

Beam search is compared over every combination of beam count, length penalty, early
stopping and end-of-sequence token, on the book's GPT-2 and on GPT-2 124M with random
weights. There, an end-of-sequence token the search will meet is taken from the library's
own output, since random weights rarely produce any given token.
"""

from itertools import product

import pytest
import torch
from transformers import AutoTokenizer

from snippets.decoding import beam_search, generate_batch, reorder
from snippets.hub import GPT2_SHAKESPEARE
from tests.inputs import random_ids

pytestmark = pytest.mark.usefixtures("no_grad")

PROMPTS = ["Enter ARIEL", "CALIBAN.\nThis island's mine, by Sycorax my mother,", "O"]


@pytest.fixture(scope="module")
def tokenizer():
    tokenizer = AutoTokenizer.from_pretrained(GPT2_SHAKESPEARE.repo_id)
    tokenizer.pad_token = tokenizer.decode(0)
    tokenizer.padding_side = "left"
    return tokenizer


@pytest.fixture(scope="module")
def newline(tokenizer):
    return tokenizer.encode("\n")[0]


def library_beams(model, ids, num_beams, max_new_tokens, **settings):
    return model.generate(
        ids,
        num_beams=num_beams,
        max_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=0,
        **settings,
    )


@pytest.mark.parametrize("prompt", PROMPTS[:2])
def test_beam_search_equals_the_library_in_every_setting(
    gpt2_shakespeare, tokenizer, newline, prompt
):
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    settings = product((2, 5), (0.0, 1.0, 2.0), (False, True, "never"), (None, newline))
    for num_beams, length_penalty, early_stopping, eos_token_id in settings:
        ours = beam_search(
            gpt2_shakespeare, ids, num_beams, 16, length_penalty, early_stopping, eos_token_id
        )
        theirs = library_beams(
            gpt2_shakespeare,
            ids,
            num_beams,
            16,
            length_penalty=length_penalty,
            early_stopping=early_stopping,
            eos_token_id=eos_token_id,
        )
        assert torch.equal(ours, theirs), (num_beams, length_penalty, early_stopping)


def test_beam_search_ends_hypotheses_early_with_a_frequent_end_token(gpt2_shakespeare, tokenizer):
    # a comma ends most hypotheses within a few tokens: many finish, at different lengths
    ids = tokenizer(PROMPTS[1], return_tensors="pt")["input_ids"]
    comma = tokenizer.encode(",")[0]
    lengths = set()
    for num_beams, length_penalty in product((3, 4), (-1.0, 0.5, 3.0)):
        ours = beam_search(gpt2_shakespeare, ids, num_beams, 24, length_penalty, eos_token_id=comma)
        theirs = library_beams(
            gpt2_shakespeare, ids, num_beams, 24, length_penalty=length_penalty, eos_token_id=comma
        )
        assert torch.equal(ours, theirs), (num_beams, length_penalty)
        lengths.add(ours.shape[1])
    assert len(lengths) > 1  # the length penalty changed which hypothesis won


def test_beam_search_equals_the_library_at_full_size(gpt2_124m):
    ids = random_ids(gpt2_124m, 1, 12, seed=1)
    free = library_beams(gpt2_124m, ids, 3, 8, eos_token_id=None)
    met = free[0, 12 + 3].item()  # a token the best hypothesis produces
    settings = [(None, False, 1.0), (met, False, 1.0), (met, "never", 1.0), (met, True, 0.0)]
    for eos_token_id, early_stopping, length_penalty in settings:
        ours = beam_search(gpt2_124m, ids, 3, 8, length_penalty, early_stopping, eos_token_id)
        theirs = library_beams(
            gpt2_124m,
            ids,
            3,
            8,
            length_penalty=length_penalty,
            early_stopping=early_stopping,
            eos_token_id=eos_token_id,
        )
        assert torch.equal(ours, theirs), (eos_token_id, early_stopping, length_penalty)
    assert ours.shape[1] < 12 + 8  # with no length penalty, a hypothesis that ended won


def test_one_beam_is_greedy(gpt2_shakespeare, tokenizer):
    ids = tokenizer(PROMPTS[0], return_tensors="pt")["input_ids"]
    greedy = gpt2_shakespeare.generate(
        ids, max_new_tokens=20, do_sample=False, eos_token_id=None, pad_token_id=0
    )
    assert torch.equal(beam_search(gpt2_shakespeare, ids, 1, 20), greedy)


def test_reorder_copies_the_rows_of_the_beams_that_go_on():
    keys = torch.arange(3.0).view(3, 1, 1, 1).expand(3, 2, 4, 8)  # (K, H, S, D), row k = k
    cache = reorder([(keys, -keys)], torch.tensor([2, 2, 0]))
    assert cache[0][0][:, 0, 0, 0].tolist() == [2.0, 2.0, 0.0]
    assert cache[0][1][:, 0, 0, 0].tolist() == [-2.0, -2.0, 0.0]


def batch_of(tokenizer, prompts):
    batch = tokenizer(prompts, return_tensors="pt", padding=True)
    return batch["input_ids"], batch["attention_mask"]


@pytest.mark.parametrize("eos", [None, "newline", 0])
def test_generate_batch_equals_the_library_on_a_left_padded_batch(
    gpt2_shakespeare, tokenizer, newline, eos
):
    eos_token_id = newline if eos == "newline" else eos
    long = " ".join(["Full fathom five thy father lies;"] * 23)  # 230 tokens, of 256 positions
    ids, attention_mask = batch_of(tokenizer, [*PROMPTS, long])
    assert attention_mask[:, 0].tolist() == [0, 0, 0, 1]  # padded on the left, up to the long one
    ours = generate_batch(gpt2_shakespeare, ids, attention_mask, 24, eos_token_id, pad_token_id=0)
    theirs = gpt2_shakespeare.generate(
        input_ids=ids,
        attention_mask=attention_mask,
        max_new_tokens=24,
        do_sample=False,
        eos_token_id=eos_token_id,
        pad_token_id=0,
    )
    assert torch.equal(ours, theirs)


def test_generate_batch_gives_each_row_what_it_gets_alone(gpt2_shakespeare, tokenizer, newline):
    ids, attention_mask = batch_of(tokenizer, PROMPTS)
    together = generate_batch(gpt2_shakespeare, ids, attention_mask, 16, newline, pad_token_id=0)
    for row, prompt in enumerate(PROMPTS):
        alone = tokenizer(prompt, return_tensors="pt")
        alone = generate_batch(
            gpt2_shakespeare,
            alone["input_ids"],
            alone["attention_mask"],
            16,
            newline,
            pad_token_id=0,
        )[0]
        padding = int((attention_mask[row] == 0).sum())
        real = together[row, padding:]  # the prompt, then what was generated
        assert real[: len(alone)].tolist() == alone.tolist()
        assert (real[len(alone) :] == 0).all()  # ended earlier than the batch: padded


def test_generate_batch_equals_the_library_at_full_size(gpt2_124m):
    ids = random_ids(gpt2_124m, 3, 9, seed=2)
    attention_mask = torch.ones_like(ids)
    attention_mask[0, :5], attention_mask[1, :2] = 0, 0  # rows of 4, 7 and 9 real tokens
    ids = ids.masked_fill(attention_mask == 0, 0)
    free = generate_batch(gpt2_124m, ids, attention_mask, 6)
    met = free[1, 9 + 2].item()  # row 1 ends after three tokens
    for eos_token_id in (None, met):
        ours = generate_batch(gpt2_124m, ids, attention_mask, 6, eos_token_id, pad_token_id=0)
        theirs = gpt2_124m.generate(
            input_ids=ids,
            attention_mask=attention_mask,
            max_new_tokens=6,
            do_sample=False,
            eos_token_id=eos_token_id,
            pad_token_id=0,
        )
        assert torch.equal(ours, theirs), eos_token_id
    assert (ours[1, 9 + 3 :] == 0).all()  # padded after its end token


def test_warning_pad_on_the_left_and_count_positions_from_the_first_real_token(
    prove, gpt2_shakespeare, tokenizer
):
    short, long = "O, brave new world", "MIRANDA.\nO, wonder! How many goodly creatures"
    alone = gpt2_shakespeare(tokenizer(short, return_tensors="pt")["input_ids"]).logits[0, -1]
    ids, attention_mask = batch_of(tokenizer, [short, long])  # left padding
    positions = (attention_mask.cumsum(dim=-1) - 1).clamp(min=0)
    counted = gpt2_shakespeare(ids, attention_mask=attention_mask, position_ids=positions)
    counted = counted.logits[0, -1]
    from_column = gpt2_shakespeare(ids, attention_mask=attention_mask).logits[0, -1]
    prove(
        "GPT-2 on a left-padded batch, positions counted from the first real token",
        "`GPT2LMHeadModel` on the prompt alone",
        "batch of 2 prompts, book's GPT-2, the short prompt's last logits",
        counted,
        alone,
        2e-4,  # float32 logits up to 14: measured 1.0e-5
    )
    assert (from_column - alone).abs().max() > 0.5  # read as if it started later
    tokenizer.padding_side = "right"
    try:
        ids, attention_mask = batch_of(tokenizer, [short, long])
    finally:
        tokenizer.padding_side = "left"
    last_column = gpt2_shakespeare(ids, attention_mask=attention_mask).logits[0, -1]
    assert attention_mask[0, -1] == 0  # the short prompt's last column is padding
    assert last_column.argmax() != alone.argmax()  # its next token is predicted from there
