"""WordPiece by hand: how BERT's tokenizer splits a word into vocabulary pieces.

The normalizer and pre-tokenizer are the library's own; the splitting is ours,
and tests/test_bert_tokenizer.py proves it equal to the library's on text the
chapter does not show.
"""


# --8<-- [start:wordpiece]
def wordpiece(word, vocab, unk_token="[UNK]", max_chars=100):
    """Split one word greedily: the longest vocabulary entry first, then the rest."""
    if len(word) > max_chars:
        return [unk_token]
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
        else:  # not even one character matched: the whole word is unknown
            return [unk_token]
        pieces.append(piece)
        start = end
    return pieces


# --8<-- [end:wordpiece]


# --8<-- [start:tokenize]
def tokenize_by_hand(text, tokenizer, vocab):
    """The library's normalizer and pre-tokenizer, then our WordPiece."""
    backend = tokenizer.backend_tokenizer
    normalized = backend.normalizer.normalize_str(text)
    words = [word for word, _span in backend.pre_tokenizer.pre_tokenize_str(normalized)]
    return [piece for word in words for piece in wordpiece(word, vocab)]


# --8<-- [end:tokenize]
