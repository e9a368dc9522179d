"""docs/bert/pooler.md against transformers, on MiniLM's real weights and on inputs the
page does not show: its two warning boxes (the pooler is a dense layer and tanh on [CLS];
shapes do not check a rebuilt model). The forward pass by hand that the page assembles
is checked in tests/test_snippets_bert_by_hand.py."""

import pytest
import torch

from snippets import bert_by_hand as bh
from tests.inputs import ATOL, BATCH, PAIRS

pytestmark = pytest.mark.usefixtures("no_grad")


def test_warning_the_pooler_is_a_dense_layer_and_tanh_on_cls(prove, minilm, tokenizer):
    """docs/bert/pooler.md, warning "The pooler is a dense layer and tanh on
    `[CLS]`; there is no attention in it": it reads the [CLS] vector only."""
    batch = tokenizer(*PAIRS, padding=True, return_tensors="pt")
    last_hidden_state = minilm(**batch).last_hidden_state
    assert sorted(name for name, _ in minilm.pooler.named_parameters()) == [
        "dense.bias",
        "dense.weight",
    ]
    torch.manual_seed(3)
    noisy = last_hidden_state.clone()
    noisy[:, 1:] = 10 * torch.randn_like(noisy[:, 1:])
    assert torch.equal(minilm.pooler(noisy), minilm.pooler(last_hidden_state))
    assert torch.equal(bh.pool(minilm.pooler, noisy), bh.pool(minilm.pooler, last_hidden_state))
    expected = torch.tanh(
        last_hidden_state[:, 0] @ minilm.pooler.dense.weight.T + minilm.pooler.dense.bias
    )
    prove(
        "BERT pooler by hand: dense layer and tanh on [CLS]",
        "`BertPooler`",
        "batch of 3 sentence pairs, MiniLM",
        expected,
        minilm.pooler(last_hidden_state),
        ATOL,
    )


def test_warning_shapes_do_not_check_a_rebuilt_model(prove, minilm, tokenizer):
    """docs/bert/pooler.md, warning "Shapes do not check a rebuilt model": the
    forward pass by hand without its padding mask has every shape right and the numbers
    wrong on the real tokens of padded rows; with the mask it equals the library."""
    batch = tokenizer(BATCH, padding=True, return_tensors="pt")
    theirs = minilm(**batch, output_hidden_states=True)
    ours = bh.forward(minilm, batch["input_ids"], batch["attention_mask"])
    unmasked = bh.forward(minilm, batch["input_ids"], torch.ones_like(batch["attention_mask"]))
    real = batch["attention_mask"].bool()
    for result in (ours, unmasked):
        assert result.last_hidden_state.shape == theirs.last_hidden_state.shape
        assert result.pooler_output.shape == theirs.pooler_output.shape
        assert len(result.hidden_states) == len(theirs.hidden_states)
    prove(
        "BERT forward pass by hand, with the padding mask (last hidden state)",
        "`BertModel`",
        "padded batch of 4, MiniLM, real tokens",
        ours.last_hidden_state[real],
        theirs.last_hidden_state[real],
        5e-5,  # float32 through 6 layers, values up to 6: measured 3.1e-6
    )
    padded_rows = ~real.all(dim=1)
    gap = unmasked.last_hidden_state - theirs.last_hidden_state  # (B, T, C)
    assert all(gap[row][real[row]].abs().max() > 0.1 for row in padded_rows.nonzero()[:, 0])
    unpadded = real.all(dim=1)  # a row without padding needs no mask
    prove(
        "BERT forward pass by hand, without the padding mask (last hidden state)",
        "`BertModel`",
        "padded batch of 4, MiniLM, the rows without padding",
        unmasked.last_hidden_state[unpadded],
        theirs.last_hidden_state[unpadded],
        5e-5,  # float32 through 6 layers, values up to 6: measured 2.1e-6
    )
