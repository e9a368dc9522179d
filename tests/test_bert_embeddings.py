"""docs/bert/embeddings.md's warning box, pinned on MiniLM's real weights against
transformers' own BertModel: `hidden_states[0]` is the page's finished output, position
and token type embeddings included, so adding them again counts them twice. The page's
code itself is checked against the library, on inputs the page does not show, in
tests/test_snippets_bert_by_hand.py."""

import pytest

from snippets import bert_by_hand as bh
from tests.inputs import ATOL, PAIRS

pytestmark = pytest.mark.usefixtures("no_grad")


def test_warning_hidden_states_0_already_contains_positions_and_token_types(
    prove, minilm, tokenizer
):
    """docs/bert/embeddings.md, warning "`hidden_states[0]` already contains the position
    and token type embeddings": adding the position and segment embeddings to
    hidden_states[0] counts them twice."""
    batch = tokenizer(*PAIRS, padding=True, return_tensors="pt")
    first = minilm(**batch, output_hidden_states=True).hidden_states[0]
    by_hand = bh.embed(minilm.embeddings, batch["input_ids"], batch["token_type_ids"])
    prove(
        "BERT embeddings by hand",
        "`BertEmbeddings`",
        "batch of 3 sentence pairs, MiniLM",
        by_hand,
        first,
        ATOL,
    )
    tables = minilm.embeddings
    T = batch["input_ids"].shape[1]
    twice = (
        first
        + tables.position_embeddings.weight[:T]
        + tables.token_type_embeddings.weight[batch["token_type_ids"]]
    )
    assert (twice - first).abs().max() > 0.5
