"""docs/bert/attention-output.md's warning box, pinned on MiniLM's real weights against
transformers' own BertModel: the feed-forward network reads the output of the page's
block (projection, residual and LayerNorm), not the self-attention's context. The page's
code itself is checked against the library, on inputs the page does not show, in
tests/test_snippets_bert_by_hand.py."""

import pytest
import torch

from snippets import bert_by_hand as bh
from tests.inputs import BATCH

pytestmark = pytest.mark.usefixtures("no_grad")


def test_warning_the_feed_forward_network_reads_this_blocks_output(prove, minilm, tokenizer):
    """docs/bert/attention-output.md, warning "The feed-forward network reads this block's
    output, not the self-attention's": the FFN takes the attention block's output (after
    the projection, the residual and LayerNorm), not the output of attention.self."""
    batch = tokenizer(BATCH, padding=True, return_tensors="pt")
    library = minilm(**batch, output_hidden_states=True)
    additive_mask = bh.additive_padding_mask(batch["attention_mask"], torch.float32)
    real = batch["attention_mask"].bool()
    H = minilm.config.num_attention_heads
    ours, targets = [], []
    for i, layer in enumerate(minilm.encoder.layer):
        x = library.hidden_states[i]
        context, _ = bh.self_attention(layer.attention.self, x, additive_mask, H)
        h = bh.attention_output(layer.attention.output, context, x)
        target = library.hidden_states[i + 1][real]
        ours.append(bh.feed_forward(layer, h)[real])
        targets.append(target)
        assert (bh.feed_forward(layer, context)[real] - target).abs().max() > 1.0
    prove(
        "BERT layer by hand: self-attention, output block, then feed-forward",
        "`BertLayer`",
        "padded batch of 4, MiniLM, each of its 6 layers, real tokens",
        torch.stack(ours),
        torch.stack(targets),
        5e-5,  # float32 through 6 layers, values up to 10: measured 3.2e-6
    )
