"""docs/assistant/sft.md and snippets/sft.py against TRL's SFTTrainer and transformers, on
inputs the page does not show: every example of the speaker task (train and held out,
603), batches of 1 to 16 rows of varying lengths with their padding, and GPT-2 at its real
size (GPT2Config(), 124M, random weights).

What holds: `sft_batch` gives TRL's input_ids, attention_mask and labels bit for bit (TRL
appends the end-of-text token's text to the completion, tokenizes prompt + completion in
one piece and masks their common prefix; its collator pads with the end-of-text token, id
0, and -100). `sft_loss` and the model's own loss (`model(**batch).loss`) give the same
gradients; TRL's `compute_loss`, which patches the model's forward to compute each
position's log-probability with its own log-sum-exp and backward, agrees to float rounding.
`pack` gives the input_ids, labels and position_ids of TRL's padding-free collator; with
restarted positions and a block-diagonal causal mask it gives each example's padded loss to
float rounding, under sdpa (a boolean mask), eager (a float mask) and transformers' own mask
built from position_ids. The shipped model's first two steps are `fine_tune`'s, and it
beats the majority answer and its own answers shuffled across the held-out lines."""

import json
import re
import tempfile
from collections import Counter
from pathlib import Path

import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

from snippets.hub import GPT2_SPEAKER
from snippets.sft import (
    IGNORE,
    block_causal_mask,
    document_losses,
    fine_tune,
    pack,
    sft_batch,
    sft_loss,
)
from snippets.speaker_task import MODEL, SFT_SETTINGS, answers, speaker_examples

DOCS = Path(__file__).parents[1] / "docs"
LOSS_ATOL = 1e-4  # TRL's fused loss against ours: float rounding, measured below
GRAD_ATOL = 1e-4  # and its gradients
PACKED_ATOL = 1e-4  # a packed example's loss against the same example padded
RUN_ATOL = 1e-4  # fine_tune's first losses against the shipped run's: measured 0 to 1e-6


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(MODEL)


@pytest.fixture(scope="module")
def shipped_metrics():
    from huggingface_hub import hf_hub_download

    return json.loads(Path(hf_hub_download(GPT2_SPEAKER.repo_id, "metrics.json")).read_text())


@pytest.fixture(scope="module")
def examples():
    train, held_out, _ = speaker_examples(seed=0)
    return train + held_out


def sft_trainer(model, tokenizer, examples, completion_only_loss=True):
    with tempfile.TemporaryDirectory() as folder:
        config = SFTConfig(
            output_dir=folder,
            use_cpu=True,
            report_to="none",
            completion_only_loss=completion_only_loss,
        )
        return SFTTrainer(
            model=model,
            args=config,
            train_dataset=Dataset.from_list(examples),
            processing_class=tokenizer,
        )


def batches(examples, sizes=(1, 5, 16, 3)):
    """Consecutive batches of the given sizes, so that row lengths and padding vary."""
    start = 0
    for size in sizes:
        yield examples[start : start + size]
        start += size


def test_sft_batch_equals_trl_collator_on_every_speaker_example(tokenizer, examples):
    model = AutoModelForCausalLM.from_pretrained(MODEL)
    trainer = sft_trainer(model, tokenizer, examples)
    rows = [trainer.train_dataset[i] for i in range(len(examples))]
    assert len(rows) == len(examples) == 603
    for start in range(0, len(examples), 16):  # batches of 16, the last of 11
        ours = sft_batch(tokenizer, examples[start : start + 16])
        theirs = trainer.data_collator(rows[start : start + 16])
        for key in ("input_ids", "attention_mask", "labels"):
            assert torch.equal(ours[key], theirs[key]), (start, key)
    lengths = [sum(r["labels"][i] != IGNORE for i in range(len(r["labels"]))) for r in rows]
    assert min(lengths) == 3 and max(lengths) == 7  # ANTONIO: 2 tokens + end; TRINCULO: 6 + 1


@pytest.mark.parametrize("size", ["book", "124M"])
def test_sft_loss_equals_trl_and_the_model_own_loss_with_gradients(
    prove, tokenizer, examples, gpt2_124m, size
):
    model = AutoModelForCausalLM.from_pretrained(MODEL) if size == "book" else gpt2_124m
    sizes = (1, 5, 16, 3) if size == "book" else (4, 3)
    shown = examples[8:]  # the page shows the first eight
    trainer = sft_trainer(model, tokenizer, shown[: sum(sizes)])
    rows = [trainer.train_dataset[i] for i in range(sum(sizes))]
    model.eval()  # GPT2Config() has dropout; the book's model has none
    start = 0
    for part in batches(shown, sizes):
        batch = sft_batch(tokenizer, part)
        theirs = trainer.data_collator(rows[start : start + len(part)])
        start += len(part)
        losses, grads = {}, {}
        for name, compute in [
            ("ours", lambda b=batch: sft_loss(model(**b).logits, b["labels"])),
            ("own", lambda b=batch: model(**b).loss),
            ("trl", lambda b=theirs: trainer.compute_loss(model, dict(b))),
        ]:
            model.zero_grad()
            loss = compute()
            loss.backward()
            losses[name] = loss.detach()
            grads[name] = [p.grad.clone() for p in model.parameters()]
        inputs = f"GPT-2 {size}, {len(part)} speaker examples, padded"
        prove(
            "SFT loss by hand",
            "TRL's SFTTrainer.compute_loss",
            inputs,
            losses["ours"],
            losses["trl"],
            atol=LOSS_ATOL,
        )
        prove(
            "SFT loss by hand",
            "model(**batch).loss",
            inputs,
            losses["ours"],
            losses["own"],
            atol=LOSS_ATOL,
        )
        worst_trl = max(
            (a - b).abs().max() for a, b in zip(grads["ours"], grads["trl"], strict=True)
        )
        prove(
            "SFT loss's gradients",
            "TRL's SFTTrainer.compute_loss",
            inputs,
            worst_trl,
            torch.tensor(0.0),
            atol=GRAD_ATOL,
        )
        for a, b in zip(grads["ours"], grads["own"], strict=True):  # bit for bit
            assert torch.equal(a, b)
    model.zero_grad()


@pytest.mark.parametrize("attention", ["sdpa", "eager", "position_ids"])
def test_packed_examples_give_each_example_its_padded_loss(prove, tokenizer, examples, attention):
    implementation = "eager" if attention == "eager" else "sdpa"
    model = AutoModelForCausalLM.from_pretrained(MODEL, attn_implementation=implementation)
    for part in batches(examples[20:], (2, 7, 12)):
        batch = sft_batch(tokenizer, part)
        packed = pack(batch)
        mask = block_causal_mask(packed["document"])
        if attention == "eager":  # eager adds the mask to the scores: 0 or the minimum
            mask = torch.zeros(mask.shape).masked_fill(~mask, torch.finfo(torch.float32).min)
        kwargs = {"attention_mask": mask} if attention != "position_ids" else {"use_cache": False}
        with torch.no_grad():
            padded = model(**batch).logits
            alone = torch.stack(
                [sft_loss(padded[b : b + 1], batch["labels"][b : b + 1]) for b in range(len(part))]
            )
            logits = model(
                input_ids=packed["input_ids"], position_ids=packed["position_ids"], **kwargs
            ).logits
        together = document_losses(logits, packed["labels"], packed["document"])
        prove(
            "a packed example's loss",
            "the same example padded",
            f"book's GPT-2, {attention}, {len(part)} examples in one row",
            together,
            alone,
            atol=PACKED_ATOL,
        )


@pytest.mark.parametrize("labelled", ["completion", "every token"])
def test_pack_equals_trl_padding_free_collator(tokenizer, examples, labelled):
    """pack's input_ids, labels and position_ids are those of TRL's padding-free collator,
    which sets the label of each document's first token to -100: with every token labelled,
    that label would otherwise be predicted from the previous document's last token."""
    collator = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)
    for part in batches(examples[200:], (1, 4, 9)):
        batch = sft_batch(tokenizer, part)
        if labelled == "every token":
            batch["labels"] = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, IGNORE)
        rows = [
            {"input_ids": ids[:n].tolist(), "labels": y[:n].tolist()}
            for ids, y, n in zip(
                batch["input_ids"], batch["labels"], batch["attention_mask"].sum(1), strict=True
            )
        ]
        ours, theirs = pack(batch), collator(rows)
        for key in ("input_ids", "labels", "position_ids"):
            assert torch.equal(ours[key], theirs[key]), (labelled, len(part), key)


def test_fine_tune_reproduces_the_shipped_run_first_steps(tokenizer, shipped_metrics):
    train, _, _ = speaker_examples(SFT_SETTINGS["seed"])
    model = AutoModelForCausalLM.from_pretrained(MODEL)
    settings = {**SFT_SETTINGS, "epochs": 1}
    losses = fine_tune(model, tokenizer, train[: 2 * settings["batch_size"]], **settings)
    recorded = torch.tensor(shipped_metrics["losses"][:2])
    assert torch.allclose(torch.tensor(losses), recorded, rtol=0, atol=RUN_ATOL)


def test_the_shipped_model_beats_the_majority_and_the_shuffled_answers(tokenizer):
    _, held_out, speakers = speaker_examples(seed=0)
    tuned = AutoModelForCausalLM.from_pretrained(GPT2_SPEAKER.repo_id)
    given = answers(tuned, tokenizer, [e["prompt"] for e in held_out])
    true = [e["completion"].strip() for e in held_out]
    score = sum(g == t for g, t in zip(given, true, strict=True)) / len(held_out)
    majority = Counter(true).most_common(1)[0][1] / len(held_out)
    shuffled = sum(given.count(s) * true.count(s) for s in speakers) / len(held_out) ** 2
    assert all(g in speakers for g in given)  # the format: every answer a name
    assert 0.2 < score < 0.3 and score > majority + 0.05  # the page's bounds
    assert shuffled < majority < score


def test_warning_the_prompts_tokens_in_the_loss(tokenizer, examples):
    model = AutoModelForCausalLM.from_pretrained(MODEL)
    part = examples[40:46]
    trainer = sft_trainer(model, tokenizer, part, completion_only_loss=False)
    theirs = trainer.data_collator([trainer.train_dataset[i] for i in range(len(part))])
    ours = sft_batch(tokenizer, part)
    assert torch.equal(ours["input_ids"], theirs["input_ids"])
    prompt_counted = (theirs["labels"] != IGNORE) & (ours["labels"] == IGNORE)
    assert prompt_counted.sum() > (ours["labels"] != IGNORE).sum()  # the prompt outnumbers
    with torch.no_grad():
        logits = model(**ours).logits
    gap = (sft_loss(logits, theirs["labels"]) - sft_loss(logits, ours["labels"])).abs()
    assert gap > 100 * LOSS_ATOL


def test_warning_the_mean_per_sequence_then_over_the_batch(tokenizer, examples):
    model = AutoModelForCausalLM.from_pretrained(MODEL)
    part = examples[60:76]
    batch = sft_batch(tokenizer, part)
    trainer = sft_trainer(model, tokenizer, part)
    rows = [trainer.train_dataset[i] for i in range(len(part))]
    with torch.no_grad():
        logits = model(**batch).logits
        per_token = torch.nn.functional.cross_entropy(
            logits[:, :-1].transpose(1, 2), batch["labels"][:, 1:], reduction="none"
        )
        counted = batch["labels"][:, 1:] != IGNORE
        per_sequence = (per_token.sum(1) / counted.sum(1)).mean()
        trl = trainer.compute_loss(model, trainer.data_collator(rows))
        assert (per_sequence - trl).abs() > 100 * LOSS_ATOL
        # gradient accumulation: TRL divides each micro-batch's sum by the step's count
        halves = [rows[:5], rows[5:]]
        count = sum((trainer.data_collator(h)["labels"][:, 1:] != IGNORE).sum() for h in halves)
        parts = [
            trainer.compute_loss(model, trainer.data_collator(h), num_items_in_batch=count)
            for h in halves
        ]
        means = [trainer.compute_loss(model, trainer.data_collator(h)) for h in halves]
    assert torch.allclose(sum(parts), trl, rtol=0, atol=LOSS_ATOL)
    assert (sum(means) / 2 - trl).abs() > 100 * LOSS_ATOL


def test_warning_packing_without_a_block_diagonal_mask(tokenizer, examples):
    for implementation in ("sdpa", "eager"):
        model = AutoModelForCausalLM.from_pretrained(MODEL, attn_implementation=implementation)
        batch = sft_batch(tokenizer, examples[100:105])
        packed = pack(batch)
        with torch.no_grad():
            padded = model(**batch).logits
            alone = torch.stack(
                [sft_loss(padded[b : b + 1], batch["labels"][b : b + 1]) for b in range(5)]
            )
            for mask in [
                torch.ones_like(packed["input_ids"]),  # causal over the whole row
                None,  # no mask and the default cache: the same
            ]:
                logits = model(
                    input_ids=packed["input_ids"],
                    attention_mask=mask,
                    position_ids=packed["position_ids"],
                ).logits
                leaked = document_losses(logits, packed["labels"], packed["document"])
                assert torch.equal(leaked[0], alone[0]) or torch.allclose(
                    leaked[0], alone[0], rtol=0, atol=PACKED_ATOL
                )
                assert (leaked[1:] < alone[1:] - 1).all(), (implementation, leaked, alone)
        if implementation == "eager":  # a boolean 4D mask is added to eager's scores
            with torch.no_grad():
                logits = model(
                    input_ids=packed["input_ids"],
                    attention_mask=block_causal_mask(packed["document"]),
                    position_ids=packed["position_ids"],
                ).logits
            wrong = document_losses(logits, packed["labels"], packed["document"])
            assert (wrong - alone).abs().max() > 0.1


def test_the_shipped_model_and_the_page_agree_with_its_run(shipped_metrics):
    metrics = shipped_metrics
    settings = metrics["settings"]
    assert settings["base"] == MODEL and settings["epochs"] == 3
    steps = len(metrics["losses"])
    page = (DOCS / "assistant/sft.md").read_text(encoding="utf-8")
    described = re.search(
        r"each of the (\d+)\s+steps of the shipped model's run, three epochs\s+"
        r"of (\d+) batches",
        page,
    )
    assert described and int(described[1]) == steps and int(described[2]) * 3 == steps
    assert metrics["losses"][steps // 3 - 1] < 1 < metrics["losses"][0]  # the alt text
    assert 0.2 < metrics["exact_match_after"]["held_out"] < 0.3  # the page's bounds
    assert metrics["exact_match_before"]["held_out"] == 0.0
    assert metrics["train_size"] == 447 and "447 examples" in " ".join(page.split())
