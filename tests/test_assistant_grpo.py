"""docs/assistant/grpo.md and its module snippets/grpo.py against TRL 1.16's GRPOTrainer, on
the SFT chapter's model and on batches the page does not show: held-out prompts of several
lengths (left padding), group sizes 2, 3 and 8, completions cut at max_completion_length
(no end-of-text) beside short ones (right padding), epsilon_high unset and set, beta 0 and
0.04, the KL term with and without TRL's ratio (use_bias_correction_kl), and π_old away from
the model so that the clip acts. The loss and every gradient are compared for six loss types
(grpo, bnpo, dapo, dr_grpo, cispo, sapo), through GRPOTrainer.compute_loss, the trainer's
own entry for a prepared batch. They are not bit-equal: TRL computes the log-probabilities
with its fused, chunked head, and rounds otherwise; the largest differences, under the three
configurations of tools/numerics.py, were 3.9e-7 (loss, tolerance 1e-5) and 1.8e-6 (gradients,
2e-5), and 4.8e-6 for the log-probabilities themselves (1e-4); the advantages were equal to
the last bit (tolerance 1e-6).

The advantages are compared with those TRL's own sampling step computes
(`_generate_and_score_completions`, the method that prepares a batch: it samples with TRL's
generation, calls the reward function, normalizes), for scale_rewards "group" and "none";
the completion mask and the log-probabilities on that batch too."""

import copy
import tempfile

import pytest
import torch

from snippets.grpo import (
    exact_match_reward,
    group_advantages,
    grpo_loss,
    k3,
    per_token_logps,
    sample_groups,
)

MODEL = "tensor-by-tensor/gpt2-shakespeare-speaker"
LOSS_ATOL = 1e-5  # see above
GRAD_ATOL = 2e-5
LOSS_TYPES = ["grpo", "bnpo", "dapo", "dr_grpo", "cispo", "sapo"]


@pytest.fixture(scope="module")
def speaker():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from snippets.speaker_task import speaker_examples

    model = AutoModelForCausalLM.from_pretrained(MODEL).eval()
    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    _, held_out, _ = speaker_examples(seed=0)
    return model, tokenizer, held_out


def trainer_for(model, tokenizer, examples, G, **config):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    data = Dataset.from_list(
        [{"prompt": e["prompt"], "speaker": e["completion"].strip()} for e in examples]
    )
    args = GRPOConfig(
        output_dir=tempfile.mkdtemp(),
        use_cpu=True,
        bf16=False,
        report_to="none",
        num_generations=G,
        per_device_train_batch_size=len(examples) * G,
        **config,
    )
    return GRPOTrainer(
        model=model,
        reward_funcs=exact_match_reward,
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
    )


def fixed_batch(model, tokenizer, examples, G, max_completion_length, seed):
    """Sampled completions, advantages from their rewards, and π_old, π_ref drawn away from
    the model (0 where the mask is 0, as TRL's are)."""
    torch.manual_seed(seed)
    batch = sample_groups(
        model, tokenizer, [e["prompt"] for e in examples], G, max_completion_length
    )
    texts = tokenizer.batch_decode(batch["completion_ids"], skip_special_tokens=True)
    speaker = [e["completion"].strip() for e in examples for _ in range(G)]
    rewards = torch.tensor(exact_match_reward(texts, speaker))
    rewards[::3] = 1.0  # some groups with right answers: the held-out ones are rarely right
    batch["advantages"] = group_advantages(rewards, G)
    mask = batch["completion_mask"]
    with torch.no_grad():
        logps = per_token_logps(model, batch)
    generator = torch.Generator().manual_seed(seed)
    for key in ("old_per_token_logps", "ref_per_token_logps"):
        batch[key] = (logps + 0.4 * torch.randn(logps.shape, generator=generator)) * mask
    batch["num_items_in_batch"] = mask.sum()
    return batch


SETTINGS = [  # (G, P, max_completion_length, epsilon_high, kl_times_ratio)
    (2, 6, 5, None, True),
    (3, 4, 7, 0.28, True),
    (8, 2, 5, 0.28, False),
]
CISPO_EPSILON_HIGH = 5.0  # TRL's suggested cap on ρ: with 0.28, every token is capped


@pytest.mark.parametrize(("G", "P", "T_c", "epsilon_high", "kl_times_ratio"), SETTINGS)
def test_grpo_loss_and_gradients_equal_trl(prove, speaker, G, P, T_c, epsilon_high, kl_times_ratio):
    model, tokenizer, held_out = speaker
    examples = held_out[10 : 10 + P]
    batch = fixed_batch(model, tokenizer, examples, G, T_c, seed=G)
    mask = batch["completion_mask"]
    assert (mask == 0).any() and (mask.sum(1) == T_c).any()  # padded rows and cut ones
    assert batch["prompt_mask"].eq(0).any()  # prompts of several lengths
    ratio = torch.exp(per_token_logps(model, batch) - batch["old_per_token_logps"]).detach()
    A = batch["advantages"].unsqueeze(1)
    clipped = ((A > 0) & (ratio > 1.28)) | ((A < 0) & (ratio < 0.8))
    assert (clipped & (mask == 1)).any()  # the clipped term is selected for some tokens
    # dr_grpo divides by max_completion_length, which may exceed the longest completion
    settings = dict(epsilon=0.2, epsilon_high=epsilon_high, max_completion_length=T_c + G % 3)
    for loss_type in LOSS_TYPES:
        these = settings
        if loss_type == "cispo":  # for cispo, epsilon_high is a cap on ρ, not 1 + ε
            these = dict(settings, epsilon_high=CISPO_EPSILON_HIGH)
            assert ((ratio < CISPO_EPSILON_HIGH) & (mask == 1)).any()  # some tokens not capped
        for beta in (0.0, 0.04):
            policy = copy.deepcopy(model)
            trainer = trainer_for(
                policy,
                tokenizer,
                examples,
                G,
                loss_type=loss_type,
                beta=beta,
                use_bias_correction_kl=kl_times_ratio,
                **these,
            )
            policy.eval()  # in train mode, compute_loss reads what only train() sets
            theirs = trainer.compute_loss(policy, batch)
            theirs.backward()
            ours_model = copy.deepcopy(model)
            ours = grpo_loss(
                per_token_logps(ours_model, batch),
                batch,
                loss_type,
                beta,
                kl_times_ratio=kl_times_ratio,
                **these,
            )
            ours.backward()
            where = (
                f"speaker GPT-2, {P} held-out prompts x G={G}, T_c<={T_c}, "
                f"eps_high={epsilon_high}, beta={beta}, kl x ratio={kl_times_ratio}"
            )
            prove(
                f"GRPO loss, {loss_type}",
                "GRPOTrainer.compute_loss",
                where,
                ours,
                theirs,
                LOSS_ATOL,
            )
            prove(
                f"GRPO gradients, {loss_type}",
                "GRPOTrainer.compute_loss, backward",
                where,
                torch.cat([p.grad.flatten() for p in ours_model.parameters()]),
                torch.cat([p.grad.flatten() for p in policy.parameters()]),
                GRAD_ATOL,
            )


@pytest.mark.parametrize("scale_rewards", ["group", "none"])
def test_advantages_mask_and_logps_equal_trls_own_sampling_step(prove, speaker, scale_rewards):
    model, tokenizer, held_out = speaker
    G, examples = 4, held_out[:6]
    torch.manual_seed(0)
    trainer = trainer_for(
        copy.deepcopy(model),
        tokenizer,
        examples,
        G,
        max_completion_length=7,
        scale_rewards=scale_rewards,
    )
    trainer.model.eval()
    rows = [{"prompt": e["prompt"], "speaker": e["completion"].strip()} for e in examples]
    prepared = trainer._generate_and_score_completions([r for r in rows for _ in range(G)])
    rewards = torch.tensor(list(trainer._logs["rewards"]["exact_match_reward"])[-len(rows) * G :])
    assert 0 < rewards.sum() < len(rewards) or scale_rewards == "none"
    prove(
        f"group advantages, scale_rewards={scale_rewards}",
        "GRPOTrainer's sampling step",
        "speaker GPT-2, 6 held-out prompts x G=4, TRL's own samples",
        group_advantages(rewards, G, scale=scale_rewards == "group"),
        prepared["advantages"],
        1e-6,
    )
    ids, mask = prepared["completion_ids"], prepared["completion_mask"]
    is_eos = ids.eq(tokenizer.eos_token_id).int()
    ours_mask = ((is_eos.cumsum(1) - is_eos) == 0).int()  # sample_groups' rule
    assert torch.equal(ours_mask, mask.int())
    with torch.no_grad():
        theirs, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model,
            torch.cat([prepared["prompt_ids"], ids], 1),
            torch.cat([prepared["prompt_mask"], mask], 1),
            ids.shape[1],
        )
        prove(
            "per-token log-probabilities",
            "GRPOTrainer's fused head",
            "speaker GPT-2, TRL's own samples, left-padded prompts",
            per_token_logps(trainer.model, prepared),
            theirs,
            1e-4,
        )


def test_sample_groups_scores_what_it_samples(speaker):
    """The KV-cached sampler and per_token_logps read the same positions: a completion
    sampled at temperature 0.01 is the greedy one, and each of its tokens has log-probability
    near 0 under per_token_logps at that temperature."""
    model, tokenizer, held_out = speaker
    torch.manual_seed(0)
    batch = sample_groups(
        model, tokenizer, [e["prompt"] for e in held_out[:5]], 3, temperature=0.01
    )
    logps = per_token_logps(model, batch, temperature=0.01, positions_from_mask=True)
    assert (logps > -1e-3).float().mean() > 0.95  # a near-tie may leave a token below
    groups = batch["completion_ids"].view(5, 3, -1)
    assert (groups == groups[:, :1]).all()  # the same answer G times


def test_warning_a_group_whose_rewards_are_all_equal_teaches_nothing(speaker):
    model, tokenizer, held_out = speaker
    batch = fixed_batch(model, tokenizer, held_out[:3], 4, 7, seed=5)
    batch["advantages"] = group_advantages(torch.tensor([1.0] * 4 + [0.0] * 8), 4)
    assert batch["advantages"].eq(0).all()
    for beta, moves in [(0.0, False), (0.04, True)]:
        policy = copy.deepcopy(model)
        grpo_loss(per_token_logps(policy, batch), batch, beta=beta).backward()
        assert any((p.grad != 0).any() for p in policy.parameters()) == moves


def test_warning_normalized_over_the_batch_not_per_group():
    rewards = torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    per_group = group_advantages(rewards, 4)
    over_batch = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
    assert per_group.view(2, 4).sum(1).abs().max() < 1e-6
    assert per_group[3] < per_group[:3].min() and per_group[7] > per_group[4:7].max()
    assert over_batch[:3].eq(over_batch[7]).all()  # every right answer alike, either prompt
    assert per_group[7] > per_group[0]  # per group, the hard prompt's right answer counts more


def test_warning_the_kls_sign_and_its_ratio_the_right_way_round():
    """On two known distributions, k3 averages to KL(p || q) over samples from p; the ratio
    inverted overestimates it; the sign flipped makes it negative."""
    generator = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(50, generator=generator), 0)
    q = torch.softmax(torch.randn(50, generator=generator), 0)
    exact = (p * (p.log() - q.log())).sum()
    samples = torch.multinomial(p, 200_000, replacement=True, generator=generator)
    logps, ref_logps = p.log()[samples], q.log()[samples]
    assert (k3(logps, ref_logps) >= 0).all()
    assert abs(k3(logps, ref_logps).mean() - exact) < 0.05 * exact
    assert k3(ref_logps, logps).mean() > 2 * exact
    assert (-k3(logps, ref_logps)).mean() < 0


def test_sample_groups_reads_left_padded_prompts_as_generate_does(speaker):
    """At temperature 1e-3 the sampler's answers are generate's greedy ones, prompt by
    prompt; scored with TRL's positions (none given), left-padded rows' log-probabilities
    move, rows without padding do not."""
    from snippets.speaker_task import answers

    model, tokenizer, held_out = speaker
    examples = held_out[:24]
    torch.manual_seed(0)
    batch = sample_groups(model, tokenizer, [e["prompt"] for e in examples], 1, 8, 1e-3)
    texts = tokenizer.batch_decode(batch["completion_ids"], skip_special_tokens=True)
    greedy = answers(model, tokenizer, [e["prompt"] for e in examples])
    assert [t.split("\n")[0].strip() for t in texts] == greedy
    with torch.no_grad():
        shifted = per_token_logps(model, batch)
        counted = per_token_logps(model, batch, positions_from_mask=True)
    padded = batch["prompt_mask"].eq(0).any(1)
    assert padded.any() and (~padded).any()
    assert torch.equal(shifted[~padded], counted[~padded])
    assert (shifted[padded] - counted[padded]).abs().max() > 0.1


def test_the_runs_as_the_page_reports_them():
    """The figure's runs (measured once, kept in .cache/): what the page's prose says of them."""
    from snippets.figures.assistant_grpo import runs

    measured = runs()
    before, majority = measured["before"], measured["majority"]
    assert len(measured["runs"]) == 3
    assert majority["held_out"]["n"] == 156 and majority["held_out"]["name"] == "PROSPERO"
    assert max(before["reward"]) < majority["held_out"]["share"]  # sampling below the shortcut
    spread = max(torch.tensor(before["reward"]).std().item(), 0.01)
    for run in measured["runs"]:
        assert max(run["kl"]) < 1, run["seed"]
        # "the sampled answers' reward rises in every seed, above the spread"
        assert min(run["after"]["reward"]) > max(before["reward"]) + spread, run["seed"]
    greedy = [r["after"]["held_out"]["exact_match"] for r in measured["runs"]]
    assert max(greedy) > before["held_out"]["exact_match"] > min(greedy)  # up in one, down
    collapsed = [r for r in measured["runs"] if r["after"]["held_out"]["top_share"] == 1.0]
    assert [r["after"]["held_out"]["top"] for r in collapsed] == ["PROSPERO"]
