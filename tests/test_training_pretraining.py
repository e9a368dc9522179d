"""The masking recipe and NSP pairs have the right statistics, the pretraining script runs
and resumes exactly, and the shipped small BERT's MLM head by hand equals the pipeline."""

import dataclasses
import json
import math

import pytest
import torch
from safetensors.torch import load_file
from transformers import (
    AutoTokenizer,
    BertConfig,
    BertForPreTraining,
    DataCollatorForLanguageModeling,
    pipeline,
)

from snippets import pretraining, training_runs
from snippets.models import BERT_SHAKESPEARE, MINILM, shakespeare_dir

TINY = [
    "--max-length", "32", "--hidden-size", "16", "--num-layers", "1", "--num-heads", "2",
    "--intermediate-size", "32", "--batch-size", "4", "--steps", "6", "--warmup-steps", "2",
    "--eval-every", "3", "--eval-pairs", "8", "--save-every", "2",
]  # fmt: skip
FIVE_SIGMA = 5  # a correct recipe lands outside 5 σ less than once in a million samples


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(MINILM.repo_id)


@pytest.fixture(scope="module")
def documents(tokenizer):
    """Three plays of the training corpus, each a list of tokenized lines."""
    names = ["hamlet_gut.txt", "lear_gut.txt", "twelfth_night_gut.txt"]
    texts = [(shakespeare_dir() / name).read_text(encoding="utf-8") for name in names]
    return [pretraining.sentences_of(text, tokenizer) for text in texts]


def within(rate, p, n):
    return abs(rate - p) < FIVE_SIGMA * math.sqrt(p * (1 - p) / n)


def masking_rates(original, inputs, labels, special, mask_token_id):
    picked = labels != -100
    masked = picked & (inputs == mask_token_id)
    kept = picked & (inputs == original)
    n_ordinary, n_picked = (~special).sum().item(), picked.sum().item()
    return {
        "picked": (n_picked / n_ordinary, 0.15, n_ordinary),
        "mask": (masked.sum().item() / n_picked, 0.8, n_picked),
        "random": ((picked & ~masked & ~kept).sum().item() / n_picked, 0.1, n_picked),
        "unchanged": (kept.sum().item() / n_picked, 0.1, n_picked),
    }


def test_masking_rates_on_real_padded_text(tokenizer, documents):
    """15 % of ordinary tokens picked; 80 / 10 / 10 of them; padding and specials never."""
    generator = torch.Generator().manual_seed(11)
    batch = pretraining.pretraining_batch(documents, tokenizer, 1500, 64, generator)
    # unmask the batch to get back its original ids, then mask it again ourselves
    original = torch.where(batch["labels"] != -100, batch["labels"], batch["input_ids"])
    original[:, -5:] = tokenizer.pad_token_id  # some padding, too
    special = torch.isin(original, torch.tensor(tokenizer.all_special_ids))
    inputs, labels = pretraining.mask_tokens(original, special, len(tokenizer),
                                             tokenizer.mask_token_id, generator)  # fmt: skip
    for name, (rate, p, n) in masking_rates(original, inputs, labels, special,
                                            tokenizer.mask_token_id).items():  # fmt: skip
        assert within(rate, p, n), (name, rate, p, n)
    picked = labels != -100
    assert not (picked & special).any()
    assert torch.equal(labels[picked], original[picked])
    assert torch.equal(inputs[~picked], original[~picked])
    assert inputs.shape == labels.shape == original.shape and labels.dtype == torch.long


def test_the_rates_follow_the_probability(tokenizer):
    """A different mlm_probability changes the picked rate, and only that."""
    generator = torch.Generator().manual_seed(5)
    original = torch.randint(999, len(tokenizer), (500, 100), generator=generator)
    special = torch.zeros_like(original, dtype=torch.bool)
    inputs, labels = pretraining.mask_tokens(original, special, len(tokenizer),
                                             tokenizer.mask_token_id, generator, 0.3)  # fmt: skip
    rates = masking_rates(original, inputs, labels, special, tokenizer.mask_token_id)
    assert within(rates["picked"][0], 0.3, original.numel())
    assert not within(rates["picked"][0], 0.15, original.numel())
    assert within(*rates["mask"])


def test_the_library_collator_has_the_same_rates(tokenizer):
    """Not the same draws, the same statistics."""
    generator = torch.Generator().manual_seed(2)
    original = torch.randint(999, len(tokenizer), (1000, 128), generator=generator)
    original[:, 0], original[:, -1] = tokenizer.cls_token_id, tokenizer.sep_token_id
    special = torch.isin(original, torch.tensor(tokenizer.all_special_ids))
    ours = pretraining.mask_tokens(original, special, len(tokenizer), tokenizer.mask_token_id,
                                   generator)  # fmt: skip
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, seed=2)
    collated = collator([{"input_ids": row} for row in original.tolist()])
    theirs = collated["input_ids"], collated["labels"]
    assert not torch.equal(ours[1] != -100, theirs[1] != -100)
    for inputs, labels in (ours, theirs):
        rates = masking_rates(original, inputs, labels, special, tokenizer.mask_token_id)
        for name, (rate, p, n) in rates.items():
            assert within(rate, p, n), (name, rate)


def test_nsp_pairs_are_half_random_and_true_pairs_are_contiguous(documents):
    generator = torch.Generator().manual_seed(4)
    pairs = [pretraining.sentence_pair(documents, 61, generator) for _ in range(3000)]
    labels = [label for *_, label in pairs]
    assert set(labels) == {pretraining.IS_NEXT, pretraining.IS_RANDOM}
    assert within(sum(labels) / len(labels), 0.5, len(labels))
    streams = [" ".join(str(i) for line in document for i in line) for document in documents]

    def home(ids):  # the documents whose token stream contains these ids, contiguous
        return {i for i, s in enumerate(streams) if " ".join(map(str, ids)) in s}

    for first, second, label in pairs[:300]:
        assert 0 < len(first) <= 30 and len(first) + len(second) <= 61 and second
        if label == pretraining.IS_NEXT:
            assert home(first + second)  # B continues A, in A's own document
        else:
            assert home(second) - home(first)  # B is text of another document


def test_a_batch_is_what_bert_for_pretraining_takes(tokenizer, documents):
    generator = torch.Generator().manual_seed(0)
    batch = pretraining.pretraining_batch(documents, tokenizer, 6, 48, generator)
    assert batch["input_ids"].shape == batch["labels"].shape == (6, 48)
    assert batch["next_sentence_label"].shape == (6,)
    assert all(t.dtype == torch.long for t in batch.values())
    for row, types, mask in zip(batch["input_ids"], batch["token_type_ids"],
                                batch["attention_mask"], strict=True):  # fmt: skip
        seps = (row == tokenizer.sep_token_id).nonzero().flatten().tolist()
        assert row[0] == tokenizer.cls_token_id and len(seps) == 2
        assert types[: seps[0] + 1].eq(0).all() and types[seps[0] + 1 : seps[1] + 1].eq(1).all()
        assert mask.sum() == seps[1] + 1 and types[seps[1] + 1 :].eq(0).all()


def test_the_loss_on_chosen_positions_equals_the_library_loss(tokenizer, documents):
    """Running the MLM head on the picked positions only changes nothing in the loss."""
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=64)  # fmt: skip
    model = BertForPreTraining(config).eval()
    batch = pretraining.pretraining_batch(documents, tokenizer, 5, 64,
                                          torch.Generator().manual_seed(1))  # fmt: skip
    mlm, nsp = pretraining.pretraining_loss(model, batch)
    assert torch.allclose(mlm + nsp, model(**batch).loss, atol=1e-5)


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    """The first 30,000 characters of four texts, The Tempest among them."""
    corpus = tmp_path_factory.mktemp("corpus")
    for name in ["hamlet_gut.txt", "sonnets_gut.txt", "lear_gut.txt", "tempest_gut.txt"]:
        text = (shakespeare_dir() / name).read_text(encoding="utf-8")
        (corpus / name).write_text(text[:30_000], encoding="utf-8")
    return corpus


def run(corpus, folder, *extra):
    pretraining.main(
        [*TINY, "--corpus", str(corpus), "--output", str(folder / "out"),
         "--work", str(folder / "work"), *extra]
    )  # fmt: skip
    return folder / "out"


def without_timing(metrics):
    return {k: v for k, v in metrics.items() if k not in ("seconds", "cpu_seconds")}


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


@pytest.fixture(scope="module")
def shipped():
    model = BertForPreTraining.from_pretrained(BERT_SHAKESPEARE.repo_id).eval()
    return model, AutoTokenizer.from_pretrained(BERT_SHAKESPEARE.repo_id)


def test_the_shipped_checkpoint_was_trained_by_this_script(shipped):
    metrics = json.loads((BERT_SHAKESPEARE.snapshot_dir() / "metrics.json").read_text())
    defaults = {field.name: field.default for field in dataclasses.fields(pretraining.Settings)}
    assert metrics["settings"] == defaults
    assert len(metrics["mlm_loss"]) == pretraining.Settings().steps
    assert metrics["seconds"] <= 60 * 60
    model, tokenizer = shipped
    ignored = {"architectures": None, "dtype": None}  # written by save_pretrained
    assert model.config.to_diff_dict() | ignored == (
        pretraining.shakespeare_config(tokenizer, pretraining.Settings()).to_diff_dict() | ignored
    )


@pytest.mark.parametrize("text", [
    "Now is the winter of our [MASK] made glorious summer by this sun of york.",
    "[MASK] me, my lord, i pray you [MASK] me.",
    "O romeo, romeo, wherefore art thou [MASK]?",
])  # fmt: skip
def test_the_mlm_head_by_hand_equals_the_pipeline(shipped, text):
    model, tokenizer = shipped
    fill = pipeline("fill-mask", model=BERT_SHAKESPEARE.repo_id, top_k=10)
    theirs = fill(text)
    theirs = [theirs] if isinstance(theirs[0], dict) else theirs  # one [MASK]: a flat list
    ours = pretraining.fill_mask(model, tokenizer, text, top_k=10)
    assert len(ours) == len(theirs) == text.count("[MASK]")
    for our_guesses, their_guesses in zip(ours, theirs, strict=True):
        assert [token for token, _ in our_guesses] == [g["token_str"] for g in their_guesses]
        for (_, p), guess in zip(our_guesses, their_guesses, strict=True):
            assert abs(p - guess["score"]) < 1e-6


def test_the_mlm_head_by_hand_equals_the_library_on_a_padded_batch(shipped):
    model, tokenizer = shipped
    lines = ["To be, or not to be, that is the question.", "All the world's a stage."]
    inputs = tokenizer(lines, ["And all the men and women merely players.", "Exeunt."],
                       padding=True, return_tensors="pt")  # fmt: skip
    with torch.no_grad():
        library = model(**inputs).prediction_logits  # (B, T, V)
        ours = pretraining.mlm_head(model, model.bert(**inputs).last_hidden_state)
    real = inputs["attention_mask"].bool()
    assert torch.allclose(ours[real], library[real], atol=1e-5)
