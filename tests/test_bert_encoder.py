"""docs/bert/encoder.md's warning boxes, pinned on MiniLM's real weights against
transformers' own BertModel: version 5 of the library removed the APIs that older
tutorials call (a layer returns a tensor, not a tuple), and `hidden_states[i]` is the
output of `model.encoder.layer[i - 1]`. The page's code itself is checked against the
library, on inputs the page does not show, in tests/test_snippets_bert_by_hand.py."""

import inspect

import pytest
import torch

from tests.inputs import ATOL, BATCH, SENTENCE

pytestmark = pytest.mark.usefixtures("no_grad")


def test_warning_version_5_removed_what_older_tutorials_call(minilm, tokenizer):
    """docs/bert/encoder.md, warning "Version 5 of `transformers` removed what older
    tutorials call": no get_extended_attention_mask, no head_mask, no
    find_pruneable_heads_and_indices, and a layer returns a tensor, not a tuple."""
    import transformers.pytorch_utils

    x = minilm(**tokenizer(BATCH, padding=True, return_tensors="pt"), output_hidden_states=True)
    returned = minilm.encoder.layer[0](x.hidden_states[0])
    assert isinstance(returned, torch.Tensor)
    assert returned[0].shape == x.hidden_states[0].shape[1:]  # [0] is the first sequence
    assert not hasattr(minilm, "get_extended_attention_mask")
    assert "head_mask" not in inspect.signature(minilm.forward).parameters
    assert "head_mask" not in inspect.signature(minilm.encoder.layer[0].forward).parameters
    assert not hasattr(transformers.pytorch_utils, "find_pruneable_heads_and_indices")


def test_warning_hidden_states_i_is_the_output_of_layer_i_minus_1(prove, minilm, tokenizer):
    """docs/bert/encoder.md, warning "`hidden_states[i]` is the output of
    `model.encoder.layer[i - 1]`": hidden_states[0] is the embeddings; hidden_states[i] is
    the output of model.encoder.layer[i - 1], not of layer[i]."""
    batch = tokenizer(SENTENCE, return_tensors="pt")
    library = minilm(**batch, output_hidden_states=True)
    layers = minilm.encoder.layer
    assert len(library.hidden_states) == len(layers) + 1
    prove(
        "`hidden_states[0]` of `BertModel`",
        "`BertEmbeddings`",
        "one sentence, MiniLM",
        library.hidden_states[0],
        minilm.embeddings(input_ids=batch["input_ids"]),
        ATOL,
    )
    outputs = []
    for i in range(1, len(layers) + 1):
        output = layers[i - 1](library.hidden_states[i - 1])
        outputs.append(output)
        if i < len(layers):
            assert not torch.allclose(output, library.hidden_states[i + 1], atol=1e-2)
    prove(
        "`model.encoder.layer[i - 1]` called alone on `hidden_states[i - 1]`",
        "`hidden_states[i]` of `BertModel`",
        "one sentence, MiniLM, i = 1 to 6",
        torch.stack(outputs),
        torch.stack(library.hidden_states[1:]),
        ATOL,
    )
    assert torch.equal(library.hidden_states[-1], library.last_hidden_state)
