"""docs/gpt2/tokenizer.md's byte-level BPE, on inputs the page does not show, against the
shipped GPT-2's tokenizer in transformers: lossless on any Unicode, equal to our merges
applied by hand (snippets/byte_bpe.py), with every byte a token, a vocabulary the
held-out play did not shape, and what WordPiece loses kept."""

import json
import random

import pytest
from tokenizers import pre_tokenizers
from transformers import AutoTokenizer

from snippets.byte_bpe import bpe, byte_symbols, tokenize_by_hand
from snippets.hub import GPT2_SHAKESPEARE, MINILM

ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    "éèêëàâäôöûüçñøåæœßÉÀÇ"  # accented Latin
    "αβγδεжзийκλмнопрстуфх"  # Greek and Cyrillic
    "的一是不了人我在有他这中大来上東京"  # Chinese
    "🤗🙂🚀✨👍🏽🇫🇷"  # emoji, with a skin tone modifier and a flag (several code points each)
    ".,;:!?'\"()[]{}-–—/\\@#$%^&*_+=<>|~`"
    "'s 'll 't"  # the contractions GPT-2's pre-tokenizer splits off
    "     \t\n\r\x00\x1b\x7f\u00a0\u00ad\u200b\u2028"  # whitespace, controls, invisible
)


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(GPT2_SHAKESPEARE.repo_id)


@pytest.fixture(scope="module")
def ranks(tokenizer):
    merges = json.loads(tokenizer.backend_tokenizer.to_str())["model"]["merges"]
    return {tuple(pair): rank for rank, pair in enumerate(merges)}


def random_code_points(rng, length):
    """Any Unicode scalar value: every plane, surrogates excluded."""
    points = []
    while len(points) < length:
        point = rng.randrange(0x110000) if rng.random() < 0.5 else rng.randrange(0x3000)
        if not 0xD800 <= point <= 0xDFFF:
            points.append(chr(point))
    return "".join(points)


def test_round_trips_are_lossless_on_random_unicode(tokenizer):
    rng = random.Random(0)
    for _ in range(1000):
        text = random_code_points(rng, rng.randint(1, 40))
        assert tokenizer.decode(tokenizer(text)["input_ids"]) == text, repr(text)


def test_round_trips_are_lossless_on_mixed_scripts(tokenizer):
    rng = random.Random(1)
    for _ in range(2000):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 60)))
        assert tokenizer.decode(tokenizer(text)["input_ids"]) == text, repr(text)


def test_bpe_by_hand_equals_the_library(tokenizer, ranks):
    rng = random.Random(2)
    for _ in range(2000):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 60)))
        assert tokenize_by_hand(text, tokenizer, ranks) == tokenizer.tokenize(text), repr(text)
    for _ in range(300):
        text = random_code_points(rng, rng.randint(1, 20))
        assert tokenize_by_hand(text, tokenizer, ranks) == tokenizer.tokenize(text), repr(text)


def test_every_byte_is_a_token(tokenizer):
    symbols = byte_symbols()
    assert set(symbols.values()) == set(pre_tokenizers.ByteLevel.alphabet())
    assert sorted(tokenizer.convert_tokens_to_ids(list(symbols.values()))) == list(range(1, 257))
    assert symbols[ord(" ")] == "Ġ" and symbols[ord("\n")] == "Ċ"


def test_an_unseen_word_falls_back_to_bytes(tokenizer, ranks):
    word = "".join(byte_symbols()[b] for b in "ẞẞ".encode())  # a capital sharp s, twice
    assert bpe(word, ranks) == tokenizer.tokenize("ẞẞ")
    assert len(tokenizer.tokenize("ẞẞ")) >= 2


def test_the_held_out_play_did_not_shape_the_vocabulary(tokenizer):
    # Prospero is named only in The Tempest: a tokenizer that read it would hold him whole
    assert len(tokenizer.tokenize(" Prospero")) > 1
    assert len(tokenizer.tokenize("PROSPERO")) > 1
    assert tokenizer.tokenize(" Romeo") == ["ĠRomeo"]  # a name from a training play


def test_wordpiece_loses_what_byte_level_bpe_keeps(tokenizer):
    wordpiece = AutoTokenizer.from_pretrained(MINILM.repo_id)
    text = "Naïve CAFÉS 🤗"
    ids = wordpiece(text, add_special_tokens=False)["input_ids"]
    assert wordpiece.decode(ids) == "naive cafes [UNK]"  # accents and case lost, emoji unknown
    assert wordpiece.decode(ids, skip_special_tokens=True) == "naive cafes"
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text
