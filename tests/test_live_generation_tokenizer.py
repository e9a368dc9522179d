"""The live generation page's tokenizer, docs/live/js/bpe.js, run in headless Chromium on
the built site, against the book's GPT-2 tokenizer in transformers: the same tokens and ids,
and the same text decoded from them, on every line of The Tempest and on the random Unicode
strings of tests/tokenizer_texts.py; and the same text from random ids."""

import random

import pytest
from transformers import AutoTokenizer

from snippets.hub import GPT2_SHAKESPEARE
from tests.tokenizer_texts import random_texts, tempest_lines

RANDOM_IDS = 1000


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(GPT2_SHAKESPEARE.repo_id)


def run_in_browser(tab, server, code, data):
    """`code`, a JavaScript function of the tokenizer and `data`, run on the built site."""
    tab.goto(server)
    return tab.evaluate(
        f"""async ([module, json, data]) => {{
            const {{ ByteLevelBPE }} = await import(module);
            const tokenizer = new ByteLevelBPE(await (await fetch(json)).json());
            return ({code})(tokenizer, data);
        }}""",
        [server + "live/js/bpe.js", server + "live/models/gpt2-shakespeare/tokenizer.json", data],
    )


def assert_same_as_python(tokenizer, texts, encodings):
    assert len(encodings) == len(texts)
    for text, js in zip(texts, encodings, strict=True):
        ids = tokenizer(text)["input_ids"]
        tokens = tokenizer.convert_ids_to_tokens(ids)
        assert (js["tokens"], js["ids"]) == (tokens, ids), (
            f"first input that differs: {text!r}\nPython: {tokens}\nJS:     {js['tokens']}"
        )
        assert js["decoded"] == tokenizer.decode(ids), (
            f"first input decoded differently: {text!r}\n"
            f"Python: {tokenizer.decode(ids)!r}\nJS:     {js['decoded']!r}"
        )


ENCODE_AND_DECODE = """(tokenizer, texts) => texts.map((text) => {
    const { tokens, ids } = tokenizer.encode(text);
    return { tokens, ids, decoded: tokenizer.decode(ids) };
})"""


def test_every_line_of_the_tempest(tab, server, tokenizer):
    texts = tempest_lines()
    assert_same_as_python(tokenizer, texts, run_in_browser(tab, server, ENCODE_AND_DECODE, texts))
    assert not tab.problems, "; ".join(tab.problems)


def test_random_unicode(tab, server, tokenizer):
    texts = random_texts()
    assert_same_as_python(tokenizer, texts, run_in_browser(tab, server, ENCODE_AND_DECODE, texts))
    assert not tab.problems, "; ".join(tab.problems)


def test_decoding_random_ids(tab, server, tokenizer):
    """As generation does: ids one at a time, a character's bytes cut between tokens."""
    rng = random.Random(0)
    lists = [rng.choices(range(len(tokenizer)), k=rng.randint(1, 8)) for _ in range(RANDOM_IDS)]
    decoded = run_in_browser(tab, server, "(t, lists) => lists.map((ids) => t.decode(ids))", lists)
    for ids, js in zip(lists, decoded, strict=True):
        assert js == tokenizer.decode(ids), (
            f"first ids decoded differently: {ids} {tokenizer.convert_ids_to_tokens(ids)}\n"
            f"Python: {tokenizer.decode(ids)!r}\nJS:     {js!r}"
        )
    assert not tab.problems, "; ".join(tab.problems)
