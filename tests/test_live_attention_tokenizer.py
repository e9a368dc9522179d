"""The live attention page's tokenizer, docs/live/js/wordpiece.js, run in headless Chromium
on the built site, against MiniLM's tokenizer in transformers: the same tokens, ids and token
types on every line of The Tempest, on pairs of consecutive lines, and on 1,000 random
Unicode strings (tests/test_live_generation_tokenizer.py draws the same for GPT-2's).

The JavaScript follows the Rust library's rules, not the browser's: the library reads character
categories from Unicode 8.0 and the browser from a newer Unicode, so the EDGE_CASES of
tests/tokenizer_texts.py name the characters where they disagree, with the other places where
JavaScript differs from Rust (the final sigma of toLowerCase, UTF-16 lengths)."""

import itertools

from tests.tokenizer_texts import random_texts, tempest_lines

# sentence pairs: each line of The Tempest with the next, from Act I, Scene II on
FIRST_PAIR, PAIRS = 1000, 300


def run_in_browser(tab, server, inputs):
    """The JavaScript tokenizer's encodings of [text, pair] inputs, in one call."""
    tab.goto(server)
    return tab.evaluate(
        """async ([module, json, inputs]) => {
            const { WordPiece } = await import(module);
            const tokenizer = new WordPiece(await (await fetch(json)).json());
            return inputs.map(([text, pair]) => tokenizer.encode(text, pair));
        }""",
        [server + "live/js/wordpiece.js", server + "live/models/minilm/tokenizer.json", inputs],
    )


def assert_same_as_python(tokenizer, inputs, encodings):
    assert len(encodings) == len(inputs)
    for (text, pair), js in zip(inputs, encodings, strict=True):
        python = tokenizer(text, pair)
        tokens = tokenizer.convert_ids_to_tokens(python["input_ids"])
        assert (js["tokens"], js["ids"], js["typeIds"]) == (
            tokens,
            python["input_ids"],
            python["token_type_ids"],
        ), (
            f"first input that differs: {text!r}, pair {pair!r}\n"
            f"Python: {tokens} {python['token_type_ids']}\n"
            f"JS:     {js['tokens']} {js['typeIds']}"
        )


def test_every_line_of_the_tempest(tab, server, tokenizer):
    inputs = [[line, None] for line in tempest_lines()]
    assert_same_as_python(tokenizer, inputs, run_in_browser(tab, server, inputs))
    assert not tab.problems, "; ".join(tab.problems)


def test_pairs_of_consecutive_lines(tab, server, tokenizer):
    lines = tempest_lines()[FIRST_PAIR : FIRST_PAIR + PAIRS + 1]
    inputs = [[first, second] for first, second in itertools.pairwise(lines)]
    assert_same_as_python(tokenizer, inputs, run_in_browser(tab, server, inputs))
    assert not tab.problems, "; ".join(tab.problems)


def test_random_unicode(tab, server, tokenizer):
    inputs = [[text, None] for text in random_texts()]
    assert_same_as_python(tokenizer, inputs, run_in_browser(tab, server, inputs))
    assert not tab.problems, "; ".join(tab.problems)
