"""docs/efficient/lora.md and its module snippets/lora.py against peft's LoRA, on MiniLM at its
real size and on inputs the page does not show: padded batches, sentence pairs, a sequence
of 512 tokens; other ranks, factors and target layers; two AdamW steps with dropout on (in
the first only B gets a gradient, so the second is the one that tests A's), the model's and,
in one test, the adapters' own. At initialisation the adapted model equals peft's and the
model without adapters bit for bit: its adapters add exact zeros. After two AdamW steps,
gradients, weights and logits are peft's bit for bit: LoRALinear computes the frozen layer
first, then adds the adapter, as peft's lora.Linear does. Computed the other way round
(before commit 0c02ecf, with no adapter dropout), autograd grouped the sum of x's gradient's
parts otherwise, and the layers below the last differed by up to 1.4e-9 in their gradients
and 5.8e-7 in their weights. Merging is exact against peft's merge of the same weights;
against the unmerged model it rounds differently: 2.6e-8 at most under the three
configurations of tools/numerics.py, and the tolerance keeps a 10× margin.

The page's numbers that come from elsewhere: the fine-tuning chapter's accuracies, which the
prose quotes, and the gap between the two chapters' last accuracies."""

import copy
import re
from pathlib import Path

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForSequenceClassification

from snippets.hub import MINILM
from snippets.lora import LoRALinear, add_lora, merge
from tests.inputs import BATCH, PAIRS

DOCS = Path(__file__).parents[1] / "docs"
MERGE_ATOL = 5e-7  # see above
LONG = " ".join(["The adapter sees every token of a long review, padding and all."] * 45)


@pytest.fixture(scope="module")
def base():
    torch.manual_seed(0)  # the classification head
    return AutoModelForSequenceClassification.from_pretrained(MINILM.repo_id, num_labels=2)


def batches(tokenizer):
    """Inputs the page does not show, with labels: a padded batch, sentence pairs (token
    type ids of 1), one sequence of 512 tokens."""
    long = tokenizer([LONG], truncation=True, max_length=512, return_tensors="pt")
    assert long["input_ids"].shape == (1, 512)
    padded = tokenizer(BATCH, padding=True, return_tensors="pt")
    pairs = tokenizer(*PAIRS, padding=True, return_tensors="pt")
    return {
        "padded batch": (padded, torch.tensor([1, 0, 1, 0])),
        "sentence pairs": (pairs, torch.tensor([0, 1, 1])),
        "512 tokens": (long, torch.tensor([1])),
    }


def peft_name(name):
    """Ours -> peft's name for the same weight (as on the page)."""
    name = re.sub(r"\.([AB])$", r".lora_\1.default.weight", name)
    return "base_model.model." + name.replace("classifier.", "classifier.modules_to_save.default.")


def twins(base, r, alpha, targets, dropout=0.0):
    """Ours and peft's LoRA on two copies of `base`, ours given peft's random A."""
    ours = add_lora(copy.deepcopy(base), r=r, alpha=alpha, targets=targets, dropout=dropout)
    config = LoraConfig(
        task_type="SEQ_CLS",
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=list(targets),
    )
    theirs = get_peft_model(copy.deepcopy(base), config)
    theirs_by_name = dict(theirs.named_parameters())
    trainable = {n: p for n, p in ours.named_parameters() if p.requires_grad}
    assert sorted(map(peft_name, trainable)) == sorted(
        n for n, p in theirs_by_name.items() if p.requires_grad
    )
    with torch.no_grad():
        for name, parameter in trainable.items():
            parameter.copy_(theirs_by_name[peft_name(name)])
    return ours, theirs, {name: theirs_by_name[peft_name(name)] for name in trainable}


def test_a_lora_linear_starts_as_its_base_layer_and_counts_r_times_in_plus_out():
    torch.manual_seed(1)
    for C_in, C_out, r in [(384, 384, 8), (384, 1536, 1), (7, 3, 16)]:
        base_layer = torch.nn.Linear(C_in, C_out)
        adapted = LoRALinear(base_layer, r=r, alpha=2 * r)
        x = torch.randn(3, 5, C_in)
        assert torch.equal(adapted(x), base_layer(x))
        trainable = sum(p.numel() for p in adapted.parameters() if p.requires_grad)
        assert trainable == r * (C_in + C_out)
        assert adapted.scaling == 2.0 and not (adapted.A == 0).all()


@pytest.mark.parametrize(
    ("r", "alpha", "targets", "dropout"),
    [
        (8, 16, ("query", "value"), 0.0),
        (1, 4, ("key",), 0.0),
        (16, 8, ("query", "key", "value"), 0.0),
        (8, 16, ("query", "value"), 0.1),
    ],
    ids=["q+v", "r1-key", "r16-qkv", "page: q+v, lora_dropout 0.1"],
)
def test_lora_equals_peft_bit_for_bit_at_init_and_after_two_adamw_steps(
    prove, base, tokenizer, r, alpha, targets, dropout
):
    ours, theirs, pairs = twins(base, r, alpha, targets, dropout)
    # a copy, as ours and peft's are: on 512 tokens the loaded model and a deep copy of it
    # differ by 5.6e-9, with no LoRA anywhere (the weights' addresses change how the CPU
    # kernels round, we suppose)
    without = copy.deepcopy(base).eval()
    inputs = batches(tokenizer)
    with torch.no_grad():
        ours.eval(), theirs.eval()
        for name, (batch, _) in inputs.items():
            before = without(**batch).logits
            prove(
                "LoRA by hand, at initialisation",
                "peft's LoRA and the model without it",
                f"MiniLM, r={r}, {'+'.join(targets)}, {name}",
                ours(**batch).logits,
                theirs(**batch).logits,
                atol=0,
            )
            assert torch.equal(ours(**batch).logits, before), name
    ours_by_name = {n: p for n, p in ours.named_parameters() if p.requires_grad}
    optimizers = [
        torch.optim.AdamW([p for p in net.parameters() if p.requires_grad], lr=1e-3)
        for net in (ours, theirs)
    ]
    setting = f"MiniLM, r={r}, {'+'.join(targets)}, lora_dropout={dropout}"
    for step, name in enumerate(["padded batch", "sentence pairs"], 1):
        batch, labels = inputs[name]
        for net, optimizer in zip((ours, theirs), optimizers, strict=True):
            net.train()
            optimizer.zero_grad()
            torch.manual_seed(step)  # the same dropout masks
            net(**batch, labels=labels).loss.backward()
            optimizer.step()
        a_grads = [p.grad for n, p in ours_by_name.items() if n.endswith(".A")]
        if step == 1:  # B = 0: A gets no gradient
            assert all((g == 0).all() for g in a_grads)
        else:
            assert all((g != 0).any() for g in a_grads)
        for what, ours_of in [("gradients", lambda p: p.grad), ("weights", lambda p: p)]:
            prove(
                f"LoRA by hand, {what} at AdamW step {step}",
                "peft's LoRA",
                f"{setting}, {name}, dropout on",
                torch.cat([ours_of(p).flatten() for p in ours_by_name.values()]),
                torch.cat([ours_of(pairs[n]).flatten() for n in ours_by_name]),
                atol=0,
            )
    with torch.no_grad():
        ours.eval(), theirs.eval()
        for name, (batch, _) in inputs.items():
            prove(
                "LoRA by hand, after two AdamW steps",
                "peft's LoRA",
                f"{setting}, {name}",
                ours(**batch).logits,
                theirs(**batch).logits,
                atol=0,
            )


def test_merging_equals_peft_merge_and_unload_and_the_unmerged_model(prove, base, tokenizer):
    ours, theirs, pairs = twins(base, 8, 16, ("query", "value"))
    torch.manual_seed(2)
    with torch.no_grad():  # trained-looking adapters: B no longer zero
        for name, parameter in pairs.items():
            if name.endswith(".B"):
                parameter.normal_(std=0.02)
                dict(ours.named_parameters())[name].copy_(parameter)
        ours.eval(), theirs.eval()
        inputs = batches(tokenizer)
        unmerged = {name: ours(**batch).logits for name, (batch, _) in inputs.items()}
        merged, merged_theirs = merge(ours), theirs.merge_and_unload()
        assert not any(isinstance(m, LoRALinear) for m in merged.modules())
        named_theirs = dict(merged_theirs.named_parameters())
        for name, parameter in merged.named_parameters():
            assert torch.equal(parameter, named_theirs[name]), name
        for name, (batch, _) in inputs.items():
            prove(
                "LoRA merged into W",
                "the unmerged adapters",
                f"MiniLM, r=8, {name}",
                merged(**batch).logits,
                unmerged[name],
                atol=MERGE_ATOL,
            )


def test_add_lora_counts_what_the_page_prints_and_peft_counts(base):
    ours = add_lora(copy.deepcopy(base))
    assert sum(p.numel() for p in ours.parameters() if p.requires_grad) == 74_498
    adapted = [n for n, m in ours.named_modules() if isinstance(m, LoRALinear)]
    assert len(adapted) == 12 and all(n.endswith((".query", ".value")) for n in adapted)


def test_warning_without_task_type_peft_leaves_the_new_head_frozen(base, tokenizer):
    batch, labels = batches(tokenizer)["padded batch"]
    for task_type, head in [("SEQ_CLS", 770), (None, 0)]:
        config = LoraConfig(
            task_type=task_type, r=8, lora_alpha=16, target_modules=["query", "value"]
        )
        theirs = get_peft_model(copy.deepcopy(base), config)
        assert theirs.get_nb_trainable_parameters()[0] == 73_728 + head
        before = {n: p.clone() for n, p in theirs.named_parameters() if "classifier" in n}
        optimizer = torch.optim.AdamW([p for p in theirs.parameters() if p.requires_grad])
        theirs(**batch, labels=labels).loss.backward()
        optimizer.step()
        after = dict(theirs.named_parameters())
        trained = [n for n, p in before.items() if not torch.equal(p, after[n])]
        # with the task type, the head's trainable copy moves; without, no head weight does
        assert bool(trained) == (task_type is not None), trained


def printed_accuracies(page):
    """{step: accuracy} from the "step N: 0.xxx held-out accuracy" lines a page shows."""
    text = (DOCS / page).read_text(encoding="utf-8")
    return {int(s): float(a) for s, a in re.findall(r"step +(\d+): (0\.\d+) held-out", text)}


def test_the_prose_quotes_the_fine_tuning_chapter_as_it_prints():
    full, lora = (
        printed_accuracies("training/fine-tuning.md"),
        printed_accuracies("efficient/lora.md"),
    )
    prose = (DOCS / "efficient/lora.md").read_text(encoding="utf-8")
    quoted = re.search(r"reached (0\.\d+) after 16 steps and (0\.\d+) after 32", prose)
    assert quoted and (float(quoted[1]), float(quoted[2])) == (full[16], full[32])
    gap = re.search(r"behind after 32, by (0\.\d+)", prose)
    assert gap and float(gap[1]) == round(full[32] - lora[32], 3)
    assert (lora[16] > full[16]) == ("is ahead after 16 steps" in prose)
