"""docs/bert/pooler-and-heads.md against transformers, on MiniLM's real weights and on
inputs the page does not show: its two warning boxes (the pooler is a dense layer and
tanh on [CLS]; a label has shape (B,)), its claim that an untrained classification head
is a coin flip drawn from the seed, exactly the head the page draws by hand, and its
pretraining heads by hand against BertForPreTraining's. The forward pass by hand that
the page builds on is checked in tests/test_snippets_bert_by_hand.py."""

import math

import pytest
import torch
from transformers import AutoModelForSequenceClassification, BertForPreTraining

from snippets import bert_by_hand as bh
from snippets.hub import MINILM
from tests.conftest import ATOL, BATCH, PAIRS

pytestmark = pytest.mark.usefixtures("no_grad")


def test_warning_the_pooler_is_a_dense_layer_and_tanh_on_cls(minilm, tokenizer):
    """docs/bert/pooler-and-heads.md, warning "The pooler is a dense layer and tanh on
    `[CLS]`; there is no attention in it": it reads the [CLS] vector only."""
    batch = tokenizer(*PAIRS, padding=True, return_tensors="pt")
    last = minilm(**batch).last_hidden_state
    assert sorted(name for name, _ in minilm.pooler.named_parameters()) == [
        "dense.bias",
        "dense.weight",
    ]
    torch.manual_seed(3)
    noisy = last.clone()
    noisy[:, 1:] = 10 * torch.randn_like(noisy[:, 1:])
    assert torch.equal(minilm.pooler(noisy), minilm.pooler(last))
    assert torch.equal(bh.pool(minilm.pooler, noisy), bh.pool(minilm.pooler, last))
    expected = torch.tanh(last[:, 0] @ minilm.pooler.dense.weight.T + minilm.pooler.dense.bias)
    assert torch.allclose(minilm.pooler(last), expected, atol=ATOL)


def untrained_classifier(seed):
    torch.manual_seed(seed)
    return AutoModelForSequenceClassification.from_pretrained(
        MINILM.repo_id, num_labels=2, attn_implementation="eager"
    )


def test_an_untrained_head_predicts_nothing(tokenizer):
    """docs/bert/pooler-and-heads.md, "An untrained head predicts nothing", the claim behind
    the warning of docs/training/fine-tuning.md on an untrained head's "confidence": a fresh
    classification head's "confidence" is an artifact of its random initialization: about
    0.5, and its answer changes with the seed."""
    texts = ["An absolute triumph of a film.", "Utterly boring from start to end."]
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    answers = set()
    for seed in range(8):
        model = untrained_classifier(seed)
        # the page draws the same heads by hand: N(0, initializer_range²) weights, zero bias
        torch.manual_seed(seed)
        drawn = torch.randn(2, model.config.hidden_size) * model.config.initializer_range
        assert torch.equal(model.classifier.weight, drawn)
        assert not model.classifier.bias.any()
        result = model(**batch, labels=torch.tensor([1, 0]))
        probabilities = result.logits.softmax(dim=-1)
        assert (probabilities - 0.5).abs().max() < 0.03
        assert abs(result.loss.item() - math.log(2)) < 0.03  # a coin flip's loss
        answers.add(tuple(probabilities.argmax(dim=-1).tolist()))
    assert len(answers) > 1  # the seed decides, not the text


def test_warning_a_label_has_shape_b_not_b_1(tokenizer):
    """docs/bert/pooler-and-heads.md, warning "A label has shape `(B,)`, not `(B, 1)`":
    labels of shape (B,) and dtype long; (B, 1) makes CrossEntropyLoss raise a
    RuntimeError."""
    model = untrained_classifier(0)
    batch = tokenizer(BATCH, padding=True, return_tensors="pt")
    labels = torch.tensor([0, 1, 1, 0])
    result = model(**batch, labels=labels)
    assert labels.shape == (len(BATCH),) and labels.dtype == torch.long
    assert torch.allclose(result.loss, torch.nn.functional.cross_entropy(result.logits, labels))
    with pytest.raises(RuntimeError, match="1D target tensor expected"):
        torch.nn.CrossEntropyLoss()(result.logits, labels.unsqueeze(1))
    pooled = bh.forward(model.bert, batch["input_ids"], batch["attention_mask"]).pooler_output
    assert torch.allclose(bh.linear(pooled, model.classifier), result.logits, atol=ATOL)


def test_pretraining_heads_by_hand(minilm, tokenizer):
    """docs/bert/pooler-and-heads.md, "The pretraining heads": both heads by hand, on our
    forward pass, equal BertForPreTraining's, on a padded batch of sentence pairs."""
    torch.manual_seed(5)
    model = BertForPreTraining(minilm.config).eval()
    model.bert.load_state_dict(minilm.state_dict())
    decoder = model.cls.predictions.decoder
    embeddings = model.bert.embeddings.word_embeddings
    assert decoder.weight is embeddings.weight  # tied: one tensor, used twice
    assert decoder.bias is model.cls.predictions.bias
    batch = tokenizer(*PAIRS, padding=True, return_tensors="pt")
    library = model(**batch)
    ours = bh.forward(
        model.bert, batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
    )
    transform = model.cls.predictions.transform
    transformed = bh.layer_norm(bh.gelu(bh.linear(ours.last_hidden_state, transform.dense)),
                                transform.LayerNorm)  # fmt: skip
    scores = transformed @ embeddings.weight.T + decoder.bias
    real = batch["attention_mask"].bool()
    assert torch.allclose(scores[real], library.prediction_logits[real], atol=ATOL)
    next_sentence = bh.linear(ours.pooler_output, model.cls.seq_relationship)
    assert torch.allclose(next_sentence, library.seq_relationship_logits, atol=ATOL)


def test_warning_shapes_do_not_check_a_rebuilt_model(minilm, tokenizer):
    """docs/bert/pooler-and-heads.md, warning "Shapes do not check a rebuilt model": the
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
    assert torch.allclose(ours.last_hidden_state[real], theirs.last_hidden_state[real], atol=ATOL)
    padded_rows = ~real.all(dim=1)
    gap = unmasked.last_hidden_state - theirs.last_hidden_state  # (B, T, C)
    assert all(gap[row][real[row]].abs().max() > 0.1 for row in padded_rows.nonzero()[:, 0])
    unpadded = real.all(dim=1)  # a row without padding needs no mask
    assert torch.allclose(unmasked.last_hidden_state[unpadded],
                          theirs.last_hidden_state[unpadded], atol=ATOL)  # fmt: skip
