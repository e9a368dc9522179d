"""docs/assistant/dpo.md and its module snippets/dpo.py against TRL 1.16's DPOTrainer, on
inputs the page does not show: training pairs of many lengths (the page shows held-out
ones), four values of beta, a policy moved away from its reference, gradients, and a random
full-size GPT2Config() model; and the tokenization on every pair the task can make.

TRL's batch (ids, attention mask, completion mask) is ours bit for bit. Its numbers are ours
to float rounding: TRL's fused LM head computes each row's log Z itself, as a running max plus
the log of a sum of exponentials in float32, over vocabulary chunks of 32,768 (one chunk for
the book's 4,096-token vocabulary), where ours calls F.log_softmax; so the sums of
log-probabilities differ in their last bits, and so does everything computed from them."""

import copy
import tempfile

import pytest
import torch
import torch.nn.functional as F
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2Config, GPT2LMHeadModel
from trl import DPOConfig, DPOTrainer

from snippets.dpo import (
    SFT_MODEL,
    dpo_batch,
    dpo_loss,
    logps_of,
    preference_pairs,
    sequence_logps,
)
from snippets.sft import IGNORE
from snippets.speaker_task import speaker_examples

LOGPS_ATOL = 3e-4  # sums of 5 to 7 tokens' log-probabilities: 2.1e-5 apart at most measured
LOSS_ATOL = 1e-4  # the loss, rewards and margins: 7.9e-6 at most measured (rewards/chosen)
GRAD_ATOL = 5e-6  # 4.8e-7 at most measured


@pytest.fixture(scope="module")
def task():
    return speaker_examples(seed=0)


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(SFT_MODEL)


@pytest.fixture(scope="module")
def reference():
    return AutoModelForCausalLM.from_pretrained(SFT_MODEL).requires_grad_(False)


@pytest.fixture(scope="module")
def moved(reference):
    """The SFT model with every weight moved by noise, so that no log-ratio is zero."""
    torch.manual_seed(1)
    policy = copy.deepcopy(reference).requires_grad_(True)
    with torch.no_grad():
        for parameter in policy.parameters():
            parameter.add_(0.02 * torch.randn_like(parameter))
    return policy


def pairs_from(examples, speakers, seed):
    """Pairs whose rejected speaker is drawn with `seed` (no model's answers)."""
    return preference_pairs(examples, [""] * len(examples), speakers, seed=seed)


def trl(policy, reference, tokenizer, pairs, beta, folder, loss_type="sigmoid"):
    """TRL's trainer on copies of the two models, and its collated batch of `pairs`."""
    config = DPOConfig(
        output_dir=folder,
        use_cpu=True,
        report_to="none",
        bf16=False,
        gradient_checkpointing=False,
        beta=beta,
        loss_type=[loss_type],
    )
    trainer = DPOTrainer(
        model=copy.deepcopy(policy),
        ref_model=copy.deepcopy(reference),
        args=config,
        train_dataset=Dataset.from_list(pairs),
        processing_class=tokenizer,
    )
    rows = [trainer.train_dataset[i] for i in range(len(pairs))]
    trainer.model.train()
    return trainer, trainer.data_collator(rows)


def compare(prove, where, policy, reference, tokenizer, pairs, beta, gradients=False):
    ours = dpo_batch(tokenizer, pairs)
    with tempfile.TemporaryDirectory() as folder:
        trainer, theirs = trl(policy, reference, tokenizer, pairs, beta, folder)
        assert torch.equal(ours["input_ids"], theirs["input_ids"])
        assert torch.equal(ours["attention_mask"], theirs["attention_mask"])
        assert torch.equal(ours["labels"] != IGNORE, theirs["completion_mask"].bool())
        ours_policy = copy.deepcopy(policy)
        policy_chosen, policy_rejected = logps_of(ours_policy, ours)
        with torch.no_grad():
            ref_chosen, ref_rejected = logps_of(reference, ours)
        loss, chosen_rewards, rejected_rewards = dpo_loss(
            policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta
        )
        their_loss = trainer.compute_loss(trainer.model, theirs)
        trainer.log({})
        logged = trainer.state.log_history[-1]
        with torch.no_grad():
            their_policy = torch.cat(trainer.compute_ref_log_probs(trainer.model, theirs))
            their_ref = torch.cat(trainer.compute_ref_log_probs(trainer.ref_model, theirs))
        if gradients:
            loss.backward()
            their_loss.backward()
            ours_grads = torch.cat([p.grad.flatten() for p in ours_policy.parameters()])
            their_grads = torch.cat([p.grad.flatten() for p in trainer.model.parameters()])
    setting = f"{where}, beta={beta}"
    prove(
        "sequence log-probabilities, policy",
        "DPOTrainer.compute_ref_log_probs",
        setting,
        torch.cat([policy_chosen, policy_rejected]).detach(),
        their_policy,
        atol=LOGPS_ATOL,
    )
    prove(
        "sequence log-probabilities, reference",
        "DPOTrainer.compute_ref_log_probs",
        setting,
        torch.cat([ref_chosen, ref_rejected]),
        their_ref,
        atol=LOGPS_ATOL,
    )
    prove(
        "DPO loss",
        "DPOTrainer.compute_loss",
        setting,
        loss.detach(),
        their_loss.detach(),
        atol=LOSS_ATOL,
    )
    margins = chosen_rewards - rejected_rewards
    for name, ours_value in [
        ("rewards/chosen", chosen_rewards.mean()),
        ("rewards/rejected", rejected_rewards.mean()),
        ("rewards/margins", margins.mean()),
    ]:
        prove(
            f"DPO {name}",
            "DPOTrainer's logged metric",
            setting,
            ours_value,
            torch.tensor(logged[name]),
            atol=LOSS_ATOL,
        )
    for name, ours_value in [
        ("logps/chosen", policy_chosen.mean()),
        ("logps/rejected", policy_rejected.mean()),
    ]:
        prove(
            f"DPO {name}",
            "DPOTrainer's logged metric",
            setting,
            ours_value.detach(),
            torch.tensor(logged[name]),
            atol=LOGPS_ATOL,
        )
    # the accuracy counts pairs: equal unless a margin sits within rounding of 0
    assert (margins.abs() > 1e-4).all()
    assert (margins > 0).float().mean().item() == logged["rewards/accuracies"]
    if gradients:
        prove(
            "gradient of the DPO loss",
            "DPOTrainer.compute_loss, backward",
            setting,
            ours_grads,
            their_grads,
            atol=GRAD_ATOL,
        )


@pytest.mark.parametrize("beta", [0.05, 0.1, 0.5, 1.0])
def test_dpo_equals_trl_on_training_pairs_of_many_lengths(
    prove, task, tokenizer, reference, moved, beta
):
    train, _, speakers = task
    pairs = pairs_from(train[200:212], speakers, seed=int(beta * 100))
    lengths = {len(p["prompt"]) for p in pairs}
    assert len(lengths) > 8  # prompts of many lengths: padding in every row but one
    where = "the SFT model moved by noise, 12 training pairs"
    compare(prove, where, moved, reference, tokenizer, pairs, beta, gradients=beta == 0.1)


def test_dpo_equals_trl_on_a_full_size_gpt2(prove, task, tokenizer):
    train, _, speakers = task
    torch.manual_seed(0)
    reference = GPT2LMHeadModel(GPT2Config()).eval().requires_grad_(False)
    policy = copy.deepcopy(reference).requires_grad_(True)
    with torch.no_grad():
        for parameter in policy.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    pairs = pairs_from(train[300:303], speakers, seed=3)
    compare(prove, "random GPT2Config() (124M), 3 pairs", policy, reference, tokenizer, pairs, 0.1)


def test_dpo_batch_is_trls_tokenization_on_every_pair_of_the_task(task, tokenizer, reference):
    """Every example of both splits against every wrong speaker: 6,030 pairs."""
    train, held_out, speakers = task
    pairs = [
        {"prompt": e["prompt"], "chosen": e["completion"], "rejected": f" {s}"}
        for e in train + held_out
        for s in speakers
        if f" {s}" != e["completion"]
    ]
    assert len(pairs) == (len(train) + len(held_out)) * (len(speakers) - 1)
    with tempfile.TemporaryDirectory() as folder:
        trainer, _ = trl(reference, reference, tokenizer, pairs, 0.1, folder)
    dataset = trainer.train_dataset  # tokenized as DPOTrainer does, end-of-text appended
    for start in range(0, len(pairs), 500):
        chunk = pairs[start : start + 500]
        theirs = trainer.data_collator([dataset[i] for i in range(start, start + len(chunk))])
        ours = dpo_batch(tokenizer, chunk)
        assert torch.equal(ours["input_ids"], theirs["input_ids"]), start
        assert torch.equal(ours["attention_mask"], theirs["attention_mask"]), start
        assert torch.equal(ours["labels"] != IGNORE, theirs["completion_mask"].bool()), start


def test_sequence_logps_counts_only_the_answer_and_its_end_of_text(tokenizer, reference):
    pairs = [{"prompt": "Line: Hark!\nSpeaker:", "chosen": " ARIEL", "rejected": " CALIBAN"}]
    batch = dpo_batch(tokenizer, pairs)
    with torch.no_grad():
        logits = reference(input_ids=batch["input_ids"]).logits
    log_probs = logits.log_softmax(-1)
    for row, answer in enumerate([" ARIEL", " CALIBAN"]):
        prompt = tokenizer(pairs[0]["prompt"])["input_ids"]
        ids = tokenizer(answer)["input_ids"] + [tokenizer.eos_token_id]
        by_token = sum(
            log_probs[row, len(prompt) + i - 1, token].item() for i, token in enumerate(ids)
        )
        got = sequence_logps(logits[row : row + 1], batch["labels"][row : row + 1]).item()
        assert abs(got - by_token) < 1e-4


def test_warning_beta_belongs_inside_the_log_sigmoid_multiplying(task, tokenizer, reference, moved):
    train, _, speakers = task
    pairs = pairs_from(train[220:226], speakers, seed=5)
    batch = dpo_batch(tokenizer, pairs)
    with torch.no_grad():
        pc, pr = logps_of(moved, batch)
        rc, rr = logps_of(reference, batch)
    delta = (pc - rc) - (pr - rr)
    for beta in (0.05, 0.1, 0.5):
        with tempfile.TemporaryDirectory() as folder:
            trainer, theirs = trl(moved, reference, tokenizer, pairs, beta, folder)
            with torch.no_grad():
                their_loss = trainer.compute_loss(trainer.model, theirs)
        right = -F.logsigmoid(beta * delta).mean()
        assert torch.allclose(right, their_loss, rtol=0, atol=LOSS_ATOL)
        for wrong in (-(beta * F.logsigmoid(delta)).mean(), -F.logsigmoid(delta / beta).mean()):
            assert not torch.allclose(wrong, their_loss, rtol=0, atol=100 * LOSS_ATOL)


def test_warning_the_reference_is_a_frozen_copy_not_the_policy_itself(task, tokenizer, reference):
    train, _, speakers = task
    pairs = pairs_from(train[230:238], speakers, seed=6)
    same = copy.deepcopy(reference).requires_grad_(True)
    optimizer = torch.optim.AdamW(same.parameters(), lr=1e-4)
    batch = dpo_batch(tokenizer, pairs)
    with torch.no_grad():
        start = torch.cat(logps_of(same, batch))
    for _ in range(3):
        chosen, rejected = logps_of(same, batch)
        with torch.no_grad():
            ref_chosen, ref_rejected = logps_of(same, batch)
        loss, chosen_rewards, rejected_rewards = dpo_loss(
            chosen, rejected, ref_chosen, ref_rejected
        )
        assert loss.item() == pytest.approx(0.6931471805599453, abs=1e-7)
        assert (chosen_rewards == 0).all() and (rejected_rewards == 0).all()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        assert (torch.cat(logps_of(same, batch)) - start).abs().max() > 0.1  # it moved
    with tempfile.TemporaryDirectory() as folder, pytest.raises(ValueError, match="same object"):
        DPOTrainer(
            model=same,
            ref_model=same,
            args=DPOConfig(output_dir=folder, use_cpu=True, report_to="none", bf16=False),
            train_dataset=Dataset.from_list(pairs),
            processing_class=tokenizer,
        )


def test_without_ref_model_trl_loads_the_saved_weights_not_the_policy_in_memory(
    task, tokenizer, reference, moved
):
    """The default path (no PEFT, no precompute_ref_log_probs): the reference is loaded from
    the policy's config._name_or_path, so it is the checkpoint, not the moved policy."""
    train, _, speakers = task
    pairs = pairs_from(train[250:252], speakers, seed=8)
    assert moved.config._name_or_path == SFT_MODEL
    with tempfile.TemporaryDirectory() as folder:
        config = DPOConfig(
            output_dir=folder,
            use_cpu=True,
            report_to="none",
            bf16=False,
            gradient_checkpointing=False,
        )
        trainer = DPOTrainer(
            model=copy.deepcopy(moved),
            args=config,
            train_dataset=Dataset.from_list(pairs),
            processing_class=tokenizer,
        )
    loaded = trainer.ref_model.state_dict()
    saved, in_memory = reference.state_dict(), moved.state_dict()
    assert loaded.keys() == saved.keys()
    assert all(torch.equal(loaded[name], saved[name]) for name in saved)
    assert not any(torch.equal(loaded[name], in_memory[name]) for name in saved)


def test_warning_the_log_probabilities_are_summed_over_the_answer_not_averaged(
    prove, task, tokenizer, reference, moved
):
    """TRL's sigmoid loss is ours, on sums; the averaged one is TRL's sigmoid_norm, not it."""
    train, _, speakers = task
    pairs = pairs_from(train[240:248], speakers, seed=7)
    batch = dpo_batch(tokenizer, pairs)
    counts = (batch["labels"][:, 1:] != IGNORE).sum(-1)
    assert len(set(counts.tolist())) > 1  # answers of several lengths
    with torch.no_grad():
        pc, pr = logps_of(moved, batch)
        rc, rr = logps_of(reference, batch)
    cc, rc_counts = counts.chunk(2)
    averaged, _, _ = dpo_loss(pc / cc, pr / rc_counts, rc / cc, rr / rc_counts, 1.0)
    summed, _, _ = dpo_loss(pc, pr, rc, rr, 1.0)
    with tempfile.TemporaryDirectory() as folder:
        trainer, theirs = trl(moved, reference, tokenizer, pairs, 1.0, folder)
        norm, theirs_norm = trl(moved, reference, tokenizer, pairs, 1.0, folder, "sigmoid_norm")
        with torch.no_grad():
            sigmoid = trainer.compute_loss(trainer.model, theirs)
            sigmoid_norm = norm.compute_loss(norm.model, theirs_norm)
    assert torch.allclose(summed, sigmoid, rtol=0, atol=LOSS_ATOL)
    assert not torch.allclose(averaged, sigmoid, rtol=0, atol=10 * LOSS_ATOL), (averaged, sigmoid)
    prove(
        "DPO loss on averaged log-probabilities",
        "DPOTrainer, loss_type='sigmoid_norm'",
        "the SFT model moved by noise, 8 training pairs, beta=1.0",
        averaged,
        sigmoid_norm,
        atol=LOSS_ATOL,
    )
