"""GPT-2's tokenizer by hand: the byte alphabet and byte-pair merges.

docs/gpt2/tokenizer.md includes these sections; tests/test_gpt2_tokenizer.py
compares them with the library on random Unicode text.
"""

import math
from itertools import pairwise


# --8<-- [start:byte_symbols]
def byte_symbols():
    """GPT-2's table from each of the 256 byte values to one printable character.

    Bytes that are printable Latin-1 characters stand for themselves; the other 68
    (control characters, the space, the non-breaking space, the soft hyphen) are
    given the characters from 256 on, in order: the space becomes "Ġ", a newline "Ċ".
    """
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table, shifted = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(256 + shifted)
            shifted += 1
    return table


# --8<-- [end:byte_symbols]


# --8<-- [start:bpe]
def bpe(word, ranks):
    """Split a word (a string of byte symbols) into tokens by applying the merges.

    Start from single symbols; repeatedly merge the adjacent pair that was learned
    first (lowest rank), the leftmost if it occurs twice, until no pair has a merge.
    """
    parts = list(word)
    while len(parts) > 1:
        pairs = list(pairwise(parts))
        best = min(pairs, key=lambda pair: ranks.get(pair, math.inf))
        if best not in ranks:
            break
        i = pairs.index(best)
        parts[i : i + 2] = [best[0] + best[1]]
    return parts


# --8<-- [end:bpe]


# --8<-- [start:tokenize]
def tokenize_by_hand(text, tokenizer, ranks):
    """The library splits the text into words; we map their bytes and merge them."""
    symbols = byte_symbols()
    tokens = []
    for _, (start, end) in tokenizer.backend_tokenizer.pre_tokenizer.pre_tokenize_str(text):
        word = "".join(symbols[byte] for byte in text[start:end].encode("utf-8"))
        tokens += bpe(word, ranks)
    return tokens


# --8<-- [end:tokenize]
