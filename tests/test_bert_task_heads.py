"""docs/bert/task-heads.md against transformers, on MiniLM's real weights and on inputs
the page does not show: its claim that an untrained classification head is a coin flip
drawn from the seed, exactly the head the page draws by hand; its warning box (a label
has shape (B,)); and the pretraining heads by hand against BertForPreTraining's."""

import math

import pytest
import torch
from transformers import AutoModelForSequenceClassification, BertForPreTraining

from snippets import bert_by_hand as bh
from snippets import pretraining
from snippets.hub import MINILM
from tests.inputs import ATOL, BATCH, PAIRS

pytestmark = pytest.mark.usefixtures("no_grad")


def untrained_classifier(seed):
    torch.manual_seed(seed)
    return AutoModelForSequenceClassification.from_pretrained(
        MINILM.repo_id, num_labels=2, attn_implementation="eager"
    )


def test_an_untrained_head_predicts_nothing(tokenizer):
    """docs/bert/task-heads.md, "An untrained head predicts nothing", the claim behind
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


def test_warning_a_label_has_shape_b_not_b_1(prove, tokenizer):
    """docs/bert/task-heads.md, warning "A label has shape `(B,)`, not `(B, 1)`":
    labels of shape (B,) and dtype long; (B, 1) makes CrossEntropyLoss raise a
    RuntimeError."""
    model = untrained_classifier(0)
    batch = tokenizer(BATCH, padding=True, return_tensors="pt")
    labels = torch.tensor([0, 1, 1, 0])
    result = model(**batch, labels=labels)
    assert labels.shape == (len(BATCH),) and labels.dtype == torch.long
    prove(
        "loss by hand: cross-entropy of the logits, labels of shape (B,)",
        "`BertForSequenceClassification` (its loss)",
        "padded batch of 4, MiniLM, untrained head (seed 0)",
        torch.nn.functional.cross_entropy(result.logits, labels),
        result.loss,
        1e-8,
    )
    with pytest.raises(RuntimeError, match="1D target tensor expected"):
        torch.nn.CrossEntropyLoss()(result.logits, labels.unsqueeze(1))
    pooled = bh.forward(model.bert, batch["input_ids"], batch["attention_mask"]).pooler_output
    prove(
        "classification head by hand on the pooler output",
        "`BertForSequenceClassification`",
        "padded batch of 4, MiniLM, untrained head (seed 0)",
        bh.linear(pooled, model.classifier),
        result.logits,
        ATOL,
    )


def test_pretraining_heads_by_hand(prove, minilm, tokenizer):
    """docs/bert/task-heads.md, "The pretraining heads": the NSP head by hand, and the MLM
    head as docs/training/mlm-head.md writes it, on our forward pass, equal
    BertForPreTraining's at MiniLM's size, on a padded batch of sentence pairs."""
    torch.manual_seed(5)
    model = BertForPreTraining(minilm.config).eval()
    model.bert.load_state_dict(minilm.state_dict())
    # tied: the decoder's weight is the word embedding matrix, one tensor used twice
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    batch = tokenizer(*PAIRS, padding=True, return_tensors="pt")
    library = model(**batch)
    ours = bh.forward(
        model.bert, batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
    )
    scores = pretraining.mlm_head(model, ours.last_hidden_state)  # (B, T, V)
    real = batch["attention_mask"].bool()
    inputs = "batch of 3 sentence pairs, MiniLM's encoder with random heads (seed 5)"
    prove(
        "MLM head by hand, on the forward pass by hand",
        "`BertForPreTraining` (prediction logits)",
        f"{inputs}, real tokens",
        scores[real],
        library.prediction_logits[real],
        1e-4,  # float32, logits up to 6: ours and the library's each 7e-6 from float64
    )
    next_sentence = bh.linear(ours.pooler_output, model.cls.seq_relationship)
    prove(
        "NSP head by hand, on the forward pass by hand",
        "`BertForPreTraining` (next-sentence logits)",
        inputs,
        next_sentence,
        library.seq_relationship_logits,
        ATOL,
    )
