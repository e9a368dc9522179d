"""docs/training/mlm-head.md's MLM head by hand (snippets/pretraining.py's `fill_mask`
and `mlm_head`), on the shipped small BERT and on sentences the page does not show,
against transformers' fill-mask pipeline (the same ten guesses, probabilities within
2e-6) and BertForPreTraining's prediction logits on a padded batch of pairs."""

import pytest
import torch
from transformers import pipeline

from snippets import pretraining
from snippets.hub import BERT_SHAKESPEARE


@pytest.mark.parametrize(
    "text",
    [
        "Now is the winter of our [MASK] made glorious summer by this sun of york.",
        "[MASK] me, my lord, i pray you [MASK] me.",
        "O romeo, romeo, wherefore art thou [MASK]?",
    ],
)
def test_the_mlm_head_by_hand_equals_the_pipeline(prove, bert_shakespeare, text):
    model, tokenizer = bert_shakespeare
    fill = pipeline("fill-mask", model=BERT_SHAKESPEARE.repo_id, top_k=10)
    theirs = fill(text)
    theirs = [theirs] if isinstance(theirs[0], dict) else theirs  # one [MASK]: a flat list
    ours = pretraining.fill_mask(model, tokenizer, text, top_k=10)
    assert len(ours) == len(theirs) == text.count("[MASK]")
    for our_guesses, their_guesses in zip(ours, theirs, strict=True):
        assert [token for token, _ in our_guesses] == [g["token_str"] for g in their_guesses]
    prove(
        "fill-mask by hand (the probabilities of the ten guesses)",
        '`pipeline("fill-mask")`',
        "three lines with [MASK], book's small BERT",
        torch.tensor([[p for _, p in guesses] for guesses in ours], dtype=torch.float64),
        torch.tensor([[g["score"] for g in guesses] for guesses in theirs], dtype=torch.float64),
        # float32 softmax over the vocabulary, probabilities up to 0.11: measured 2.0e-7
        # (AMD EPYC, as-is), 1.4e-7 (Intel Xeon)
        3e-6,
    )


def test_the_mlm_head_by_hand_equals_the_library_on_a_padded_batch(prove, bert_shakespeare):
    model, tokenizer = bert_shakespeare
    lines = ["To be, or not to be, that is the question.", "All the world's a stage."]
    inputs = tokenizer(
        lines,
        ["And all the men and women merely players.", "Exeunt."],
        padding=True,
        return_tensors="pt",
    )
    with torch.no_grad():
        library = model(**inputs).prediction_logits  # (B, T, V)
        ours = pretraining.mlm_head(model, model.bert(**inputs).last_hidden_state)
    real = inputs["attention_mask"].bool()
    prove(
        "MLM head by hand",
        "`BertForPreTraining` (prediction logits)",
        "batch of 2 sentence pairs, book's small BERT, real tokens",
        ours[real],
        library[real],
        1e-5,
    )
