"""docs/bert/self-attention.md's warning boxes, pinned on MiniLM's real weights against
transformers' own BertModel: the default (SDPA) attention returns no probabilities while
the eager one does, and BERT scales its scores by the square root of the head size, with
each layer's own weights. The page's code itself is checked against the library, on
inputs the page does not show, in tests/test_snippets_bert_by_hand.py."""

import math

import pytest
import torch
from transformers import AutoModel

from snippets import bert_by_hand as bh
from snippets.hub import MINILM
from tests.inputs import ATOL, SENTENCE

pytestmark = pytest.mark.usefixtures("no_grad")


def test_warning_attention_probabilities_need_the_eager_attention_implementation(prove, tokenizer):
    """docs/bert/self-attention.md, warning "Attention probabilities need the eager
    attention implementation": the default attention (SDPA) returns no probabilities."""
    batch = tokenizer(SENTENCE, return_tensors="pt")
    default = AutoModel.from_pretrained(MINILM.repo_id)
    eager = AutoModel.from_pretrained(MINILM.repo_id, attn_implementation="eager")
    assert default.config._attn_implementation == "sdpa"
    assert not default(**batch, output_attentions=True).attentions
    with_eager = eager(**batch, output_attentions=True)
    assert len(with_eager.attentions) == eager.config.num_hidden_layers
    assert torch.allclose(with_eager.attentions[0].sum(-1), torch.ones(()), atol=1e-6)
    prove(
        "`BertModel` with SDPA attention, the default (last hidden state)",
        "`BertModel` with eager attention",
        "one sentence, MiniLM",
        default(**batch).last_hidden_state,
        with_eager.last_hidden_state,
        5e-5,  # float32 through 6 layers, values up to 6: measured 2.5e-6
    )


def test_warning_scale_by_the_square_root_of_the_head_size(prove, minilm, tokenizer):
    """docs/bert/self-attention.md, warning "Scale by the square root of the head size `D`,
    not of the hidden size `C`": layer 1's attention is model.encoder.layer[1] on
    hidden_states[1], scaled by √D; not √C, and not fresh random Q/K/V on the last hidden
    state."""
    batch = tokenizer(SENTENCE, return_tensors="pt")
    library = minilm(**batch, output_hidden_states=True, output_attentions=True)
    attention = minilm.encoder.layer[1].attention.self
    H, C = minilm.config.num_attention_heads, minilm.config.hidden_size
    x = library.hidden_states[1]
    q, k = (bh.split_heads(bh.linear(x, m), H) for m in (attention.query, attention.key))
    probabilities = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(C // H), dim=-1)
    prove(
        "BERT attention probabilities by hand, scores scaled by √D",
        "`BertSelfAttention` (eager)",
        "one sentence, MiniLM, layer 1",
        probabilities,
        library.attentions[1],
        ATOL,
    )
    wrong_scale = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(C), dim=-1)
    assert not torch.allclose(wrong_scale, library.attentions[1], atol=ATOL)
    torch.manual_seed(4)
    fresh = torch.nn.Linear(C, C), torch.nn.Linear(C, C)
    last_hidden_state = library.last_hidden_state
    q, k = (bh.split_heads(bh.linear(last_hidden_state, m), H) for m in fresh)
    random_probabilities = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(C // H), dim=-1)
    assert not torch.allclose(random_probabilities, library.attentions[1], atol=1e-2)
