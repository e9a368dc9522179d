"""docs/training/masking.md's recipe and batches (snippets/pretraining.py), on real text
and on random ids the page does not show: 15 % of the ordinary tokens picked, 80 / 10 / 10
of them masked, replaced and kept, padding and special tokens never, each rate within
5 σ of the recipe's, as transformers' DataCollatorForLanguageModeling has them too; next
sentence pairs half random, the true ones contiguous; and a batch is what
BertForPreTraining takes."""

import math

import torch
from transformers import DataCollatorForLanguageModeling

from snippets import pretraining
from tests.training import documents_holding

FIVE_SIGMA = 5  # a correct recipe lands outside 5 σ less than once in a million samples


def within(rate, p, n):
    return abs(rate - p) < FIVE_SIGMA * math.sqrt(p * (1 - p) / n)


def masking_rates(original, inputs, labels, special_tokens_mask, mask_token_id):
    picked = labels != -100
    masked = picked & (inputs == mask_token_id)
    kept = picked & (inputs == original)
    n_ordinary, n_picked = (~special_tokens_mask).sum().item(), picked.sum().item()
    return {
        "picked": (n_picked / n_ordinary, 0.15, n_ordinary),
        "mask": (masked.sum().item() / n_picked, 0.8, n_picked),
        "random": ((picked & ~masked & ~kept).sum().item() / n_picked, 0.1, n_picked),
        "unchanged": (kept.sum().item() / n_picked, 0.1, n_picked),
    }


def test_masking_rates_on_real_padded_text(tokenizer, shakespeare_documents):
    """15 % of ordinary tokens picked; 80 / 10 / 10 of them; padding and specials never."""
    generator = torch.Generator().manual_seed(11)
    batch = pretraining.pretraining_batch(shakespeare_documents, tokenizer, 1500, 64, generator)
    # unmask the batch to get back its original ids, then mask it again ourselves
    original = torch.where(batch["labels"] != -100, batch["labels"], batch["input_ids"])
    original[:, -5:] = tokenizer.pad_token_id  # some padding, too
    special_tokens_mask = torch.isin(original, torch.tensor(tokenizer.all_special_ids))
    inputs, labels = pretraining.mask_tokens(
        original, special_tokens_mask, len(tokenizer), tokenizer.mask_token_id, generator
    )
    rates = masking_rates(original, inputs, labels, special_tokens_mask, tokenizer.mask_token_id)
    for name, (rate, p, n) in rates.items():
        assert within(rate, p, n), (name, rate, p, n)
    picked = labels != -100
    assert not (picked & special_tokens_mask).any()
    assert torch.equal(labels[picked], original[picked])
    assert torch.equal(inputs[~picked], original[~picked])
    assert inputs.shape == labels.shape == original.shape and labels.dtype == torch.long


def test_the_rates_follow_the_probability(tokenizer):
    """A different mlm_probability changes the picked rate, and only that."""
    generator = torch.Generator().manual_seed(5)
    original = torch.randint(999, len(tokenizer), (500, 100), generator=generator)
    special_tokens_mask = torch.zeros_like(original, dtype=torch.bool)
    inputs, labels = pretraining.mask_tokens(
        original, special_tokens_mask, len(tokenizer), tokenizer.mask_token_id, generator, 0.3
    )
    rates = masking_rates(original, inputs, labels, special_tokens_mask, tokenizer.mask_token_id)
    assert within(rates["picked"][0], 0.3, original.numel())
    assert not within(rates["picked"][0], 0.15, original.numel())
    assert within(*rates["mask"])


def test_the_library_collator_has_the_same_rates(tokenizer):
    """Not the same draws, the same statistics."""
    generator = torch.Generator().manual_seed(2)
    original = torch.randint(999, len(tokenizer), (1000, 128), generator=generator)
    original[:, 0], original[:, -1] = tokenizer.cls_token_id, tokenizer.sep_token_id
    special_tokens_mask = torch.isin(original, torch.tensor(tokenizer.all_special_ids))
    ours = pretraining.mask_tokens(
        original, special_tokens_mask, len(tokenizer), tokenizer.mask_token_id, generator
    )
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, seed=2)
    collated = collator([{"input_ids": row} for row in original.tolist()])
    theirs = collated["input_ids"], collated["labels"]
    assert not torch.equal(ours[1] != -100, theirs[1] != -100)
    for inputs, labels in (ours, theirs):
        rates = masking_rates(
            original, inputs, labels, special_tokens_mask, tokenizer.mask_token_id
        )
        for name, (rate, p, n) in rates.items():
            assert within(rate, p, n), (name, rate)


def test_nsp_pairs_are_half_random_and_true_pairs_are_contiguous(shakespeare_documents):
    generator = torch.Generator().manual_seed(4)
    pairs = [pretraining.sentence_pair(shakespeare_documents, 61, generator) for _ in range(3000)]
    labels = [label for *_, label in pairs]
    assert set(labels) == {pretraining.IS_NEXT, pretraining.IS_RANDOM}
    assert within(sum(labels) / len(labels), 0.5, len(labels))
    home = documents_holding(shakespeare_documents)
    for first, second, label in pairs[:300]:
        assert 0 < len(first) <= 30 and len(first) + len(second) <= 61 and second
        if label == pretraining.IS_NEXT:
            assert home(first + second)  # B continues A, in A's own document
        else:
            assert home(second) - home(first)  # B is text of another document


def test_a_batch_is_what_bert_for_pretraining_takes(tokenizer, shakespeare_documents):
    generator = torch.Generator().manual_seed(0)
    batch = pretraining.pretraining_batch(shakespeare_documents, tokenizer, 6, 48, generator)
    assert batch["input_ids"].shape == batch["labels"].shape == (6, 48)
    assert batch["next_sentence_label"].shape == (6,)
    assert all(t.dtype == torch.long for t in batch.values())
    for row, token_type_ids, attention_mask in zip(
        batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], strict=True
    ):
        seps = (row == tokenizer.sep_token_id).nonzero().flatten().tolist()
        assert row[0] == tokenizer.cls_token_id and len(seps) == 2
        assert token_type_ids[: seps[0] + 1].eq(0).all()
        assert token_type_ids[seps[0] + 1 : seps[1] + 1].eq(1).all()
        assert attention_mask.sum() == seps[1] + 1 and token_type_ids[seps[1] + 1 :].eq(0).all()
