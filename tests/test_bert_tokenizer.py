"""docs/bert/tokenizer.md's claims, on inputs the page does not show, against MiniLM's
tokenizer in transformers: its WordPiece by hand (snippets/wordpiece.py) gives the
library's tokens on random text and on every word of the book, and the library pads to
the longest sequence of the batch (the page's warning box), builds pairs as
[CLS] A [SEP] B [SEP] with their token types, and maps offsets to the original text."""

import random
import re

import pytest

from snippets.book import REPO_ROOT
from snippets.wordpiece import tokenize_by_hand, wordpiece

ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    "éèêëàâäôöûüçñøåæœßÉÀÇ"  # accented Latin
    "αβγδεжзийκλмнопрстуфх"  # Greek and Cyrillic
    "的一是不了人我在有他这中大来上"  # Chinese: the normalizer puts spaces around each
    "🤗🙂🚀✨"  # not in the vocabulary
    ".,;:!?'\"()[]{}-–—/\\@#$%^&*_+=<>|~`"  # punctuation is split off
    "     \t\n"
)


@pytest.fixture(scope="module")
def vocab(tokenizer):
    return tokenizer.get_vocab()


def test_reference_sentence(tokenizer):
    input_ids = tokenizer("Hugging Face makes it easy to use Transformers.")["input_ids"]
    assert input_ids == [101, 17662, 2227, 3084, 2009, 3733, 2000, 2224, 19081, 1012, 102]


def test_wordpiece_by_hand_equals_library_on_random_text(tokenizer, vocab):
    rng = random.Random(0)
    for _ in range(2000):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 60)))
        assert tokenize_by_hand(text, tokenizer, vocab) == tokenizer.tokenize(text), repr(text)


def test_wordpiece_by_hand_equals_library_on_every_word_of_the_book(tokenizer, vocab):
    words = set()
    for path in [*REPO_ROOT.glob("docs/**/*.md"), *REPO_ROOT.glob("snippets/**/*.py")]:
        words.update(re.findall(r"\S+", path.read_text(encoding="utf-8")))
    # The library matches literal special tokens ("[SEP]") before normalizing; the
    # chapter's tokenize_by_hand leaves special tokens out, and says so.
    words = {w for w in words if not any(t in w for t in tokenizer.all_special_tokens)}
    assert len(words) > 500
    for word in sorted(words):
        assert tokenize_by_hand(word, tokenizer, vocab) == tokenizer.tokenize(word), word


def test_words_longer_than_the_limit_are_unknown(tokenizer, vocab):
    assert wordpiece("a" * 100, vocab) != ["[UNK]"]
    assert wordpiece("a" * 101, vocab) == ["[UNK]"]
    assert tokenizer.tokenize("a" * 101) == ["[UNK]"]


@pytest.mark.parametrize("lengths", [(1, 1), (3, 40, 7), (200, 2), (5,)])
def test_warning_padding_true_pads_to_the_longest_in_the_batch(tokenizer, lengths):
    """docs/bert/tokenizer.md, warning "`padding=True` pads to the longest sequence in the
    batch, not to a fixed length": BERT's tokenizer does not pad to a fixed length."""
    texts = [" ".join(["word"] * n) for n in lengths]
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    longest = max(lengths) + 2  # [CLS] and [SEP]
    assert batch["input_ids"].shape == (len(texts), longest)
    assert batch["attention_mask"].sum(dim=1).tolist() == [n + 2 for n in lengths]
    assert longest < tokenizer.model_max_length
    padded = tokenizer(texts, padding="max_length", max_length=256, return_tensors="pt")
    assert padded["input_ids"].shape == (len(texts), 256)


@pytest.mark.parametrize("strategy", ["longest_first", "only_second"])
def test_pairs_are_cls_a_sep_b_sep_with_token_types(tokenizer, strategy):
    first, second = "Who wrote Hamlet? " * 3, "Shakespeare did, around 1600. " * 20
    encoded = tokenizer(first, second, truncation=strategy, max_length=48)
    input_ids, token_type_ids = encoded["input_ids"], encoded["token_type_ids"]
    assert len(input_ids) == 48
    seps = [i for i, token in enumerate(input_ids) if token == tokenizer.sep_token_id]
    assert input_ids[0] == tokenizer.cls_token_id
    assert seps[-1] == len(input_ids) - 1 and len(seps) == 2
    assert token_type_ids == [0] * (seps[0] + 1) + [1] * (len(input_ids) - seps[0] - 1)
    if strategy == "only_second":
        assert input_ids[1 : seps[0]] == tokenizer(first, add_special_tokens=False)["input_ids"]


def test_offsets_point_at_the_original_characters(tokenizer):
    text = "Naïve CAFÉS serve électroencéphalogrammes, don't they?"
    encoded = tokenizer(text, return_offsets_mapping=True)
    normalizer = tokenizer.backend_tokenizer.normalizer
    for token, (start, end) in zip(encoded.tokens(), encoded["offset_mapping"], strict=True):
        if token in tokenizer.all_special_tokens:
            assert (start, end) == (0, 0)
        else:
            assert normalizer.normalize_str(text[start:end]) == token.removeprefix("##")
