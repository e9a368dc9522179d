"""snippets/looking_inside.py, the logit lens and head ablation of docs/gpt2/looking-inside.md,
against transformers' GPT2LMHeadModel: the lens's last row against the model's logits, and
`ablate_heads` against the model run with a forward pre-hook on each block's `attn.c_proj`
that zeroes the ablated heads' slices of its input. On the book's shipped GPT-2 and on a
randomly initialised GPT-2 of the real 124M size (12 layers of 12 heads), on inputs the page
does not show: other text, random ids, batches, 256 positions (all the shipped model has);
at full size, the lens on 64 tokens and the ablation on 512.

The tolerance on the shipped model's logits is the forward pass by hand's
(tests/test_snippets_gpt2_by_hand.py), 5e-4 on float32 logits of magnitude up to about 20,
through a residual stream that reaches 400: with no head ablated, at 256 tokens, the by-hand
logits already differ from the library's by up to 3.4e-5 (summation order), so any tighter
check here would test the forward pass, not the ablation. The lens's earlier rows and the
residual streams are larger (up to 120 and 270), and so is their rounding. Each tolerance is
at least 10× the largest difference measured under the three numeric configurations
(tools/numerics.py); at the 124M size with random weights, logits stay below 4 and 1e-4 holds.
"""

import pytest
import torch
from transformers import AutoTokenizer

from snippets.hub import GPT2_SHAKESPEARE
from snippets.looking_inside import ablate_heads, logit_lens, residual_streams
from tests.inputs import random_ids

pytestmark = pytest.mark.usefixtures("no_grad")

ATOL = 5e-4  # float32 logits up to ~20, as the forward pass by hand: measured 3.5e-5
OTHER_TEXT = (
    "MIRANDA.\nO, wonder!\nHow many goodly creatures are there here!\n"
    "How beauteous mankind is! O brave new world,\nThat has such people in't!"
)


HOOKED = "`GPT2LMHeadModel`, heads zeroed by a pre-hook on `attn.c_proj`"


def described(heads, config):
    """The (layer, head) pairs in words, for the proof table: "head 1 of layer 0"."""
    layers = sorted({layer for layer, _ in heads})
    if not heads:
        return "no head"
    if len(heads) == config.n_layer * config.n_head:
        return "every head"
    if len(layers) > 1:
        return f"{len(heads)} heads in layers " + ", ".join(map(str, layers))
    chosen = sorted(head for _, head in heads)
    if len(chosen) == config.n_head:
        return f"all {len(chosen)} heads of layer {layers[0]}"
    return f"head{'s' * (len(chosen) > 1)} {', '.join(map(str, chosen))} of layer {layers[0]}"


def hooked_logits(model, input_ids, heads):
    """The reference: GPT2LMHeadModel with pre-hooks zeroing the heads' slices of c_proj's input."""
    D = model.config.n_embd // model.config.n_head

    def zero(heads_here):
        def hook(module, args):
            x = args[0].clone()  # (B, T, C): the heads side by side
            for head in heads_here:
                x[..., head * D : (head + 1) * D] = 0
            return (x,)

        return hook

    layers = {layer for layer, _ in heads}
    handles = [
        model.transformer.h[layer].attn.c_proj.register_forward_pre_hook(
            zero({head for at, head in heads if at == layer})
        )
        for layer in layers
    ]
    try:
        return model(input_ids).logits
    finally:
        for handle in handles:
            handle.remove()


def test_the_lens_last_row_is_the_models_logits_on_other_text(prove, gpt2_shakespeare):
    tokenizer = AutoTokenizer.from_pretrained(GPT2_SHAKESPEARE.repo_id)
    ids = tokenizer(OTHER_TEXT, return_tensors="pt")["input_ids"]
    lens = logit_lens(gpt2_shakespeare, ids)
    assert lens.shape == (5, ids.shape[1], 4096)
    prove(
        "logit lens by hand, last row",
        "`GPT2LMHeadModel` (logits)",
        "five lines of The Tempest, book's GPT-2",
        lens[-1],
        gpt2_shakespeare(ids).logits[0],
        ATOL,
    )


@pytest.mark.parametrize("length", [1, 256])
def test_the_lens_rows_are_the_hidden_states_through_the_head(prove, gpt2_shakespeare, length):
    """Every row, not only the last: hidden_states[l] through ln_f and lm_head (the last
    hidden state has ln_f applied already)."""
    ids = random_ids(gpt2_shakespeare, 1, length, seed=length)
    outputs = gpt2_shakespeare(ids, output_hidden_states=True)
    *streams, last = outputs.hidden_states
    ln_f, head = gpt2_shakespeare.transformer.ln_f, gpt2_shakespeare.lm_head
    expected = torch.cat([head(ln_f(s)) for s in streams] + [head(last)])  # (L + 1, T, V)
    inputs = f"random ids, 1×{length}, book's GPT-2, every layer"
    prove(
        "logit lens by hand, every row",
        "`GPT2LMHeadModel`'s hidden states through `ln_f` and `lm_head`",
        inputs,
        logit_lens(gpt2_shakespeare, ids),
        expected,
        1e-3,  # float32, rows up to 122: measured 5.3e-5
    )
    ours = residual_streams(gpt2_shakespeare, ids)
    assert len(ours[:-1]) == len(streams)
    prove(
        "residual streams by hand, before each block",
        "`GPT2LMHeadModel`'s hidden states",
        inputs,
        torch.stack(ours[:-1]),
        torch.stack(streams),
        2e-3,  # float32, streams up to 266, where float32 steps are 3e-5: measured 1.1e-4
    )


def test_the_lens_at_the_124m_size(prove, gpt2_124m):
    """At full width, depth and vocabulary on 64 tokens: the lens holds 13 × T × 50,257
    logits, 1.3 GB at T = 512. Long inputs are proven on the book's model (256 tokens)."""
    ids = random_ids(gpt2_124m, 1, 64, seed=4)
    lens = logit_lens(gpt2_124m, ids)
    assert lens.shape == (13, 64, 50257)
    prove(
        "logit lens by hand, last row",
        "`GPT2LMHeadModel` (logits)",
        "random ids, 1×64, GPT-2 124M (random init)",
        lens[-1],
        gpt2_124m(ids).logits[0],
        1e-4,
    )


HEAD_SETS = [
    set(),
    {(0, 1)},
    {(3, 3)},
    {(0, 0), (1, 3), (3, 1)},  # several heads in different layers
    {(2, h) for h in range(4)},  # all the heads of a layer
    {(layer, h) for layer in range(4) for h in range(4)},  # every head
]


@pytest.mark.parametrize("heads", HEAD_SETS, ids=str)
@pytest.mark.parametrize(("batch", "length"), [(1, 24), (3, 256)])
def test_ablation_equals_the_hooked_model(prove, gpt2_shakespeare, heads, batch, length):
    ids = random_ids(gpt2_shakespeare, batch, length, seed=batch * length)
    ours = ablate_heads(gpt2_shakespeare, ids, heads)
    assert ours.shape == (batch, length, 4096)
    ablated = described(heads, gpt2_shakespeare.config)
    prove(
        "head ablation by hand (logits)",
        HOOKED,
        f"random ids, {batch}×{length}, book's GPT-2, {ablated} ablated",
        ours,
        hooked_logits(gpt2_shakespeare, ids, heads),
        ATOL,
    )


def test_no_ablation_is_the_model_and_an_ablation_changes_it(prove, gpt2_shakespeare):
    tokenizer = AutoTokenizer.from_pretrained(GPT2_SHAKESPEARE.repo_id)
    ids = tokenizer(OTHER_TEXT, return_tensors="pt")["input_ids"]
    model_logits = gpt2_shakespeare(ids).logits
    inputs = "five lines of The Tempest, book's GPT-2"
    prove(
        "head ablation by hand, no head ablated (logits)",
        "`GPT2LMHeadModel`",
        inputs,
        ablate_heads(gpt2_shakespeare, ids, set()),
        model_logits,
        ATOL,
    )
    ablated = ablate_heads(gpt2_shakespeare, ids, {(0, 1)})
    assert (ablated - model_logits).abs().max() > 1.0  # not a no-op
    prove(
        "head ablation by hand (logits)",
        HOOKED,
        f"{inputs}, {described({(0, 1)}, gpt2_shakespeare.config)} ablated",
        ablated,
        hooked_logits(gpt2_shakespeare, ids, {(0, 1)}),
        ATOL,
    )


@pytest.mark.parametrize(
    "heads",
    [{(5, 7)}, {(0, 0), (6, 11), (11, 3)}, {(9, h) for h in range(12)}],
    ids=["one head", "three layers", "all of layer 9"],
)
def test_ablation_equals_the_hooked_model_at_the_124m_size(prove, gpt2_124m, heads):
    ids = random_ids(gpt2_124m, 1, 512, seed=len(heads))
    ours = ablate_heads(gpt2_124m, ids, heads)
    reference = hooked_logits(gpt2_124m, ids, heads)
    assert not torch.allclose(ours, gpt2_124m(ids).logits, atol=1e-3)  # the heads mattered
    ablated = described(heads, gpt2_124m.config)
    prove(
        "head ablation by hand (logits)",
        HOOKED,
        f"random ids, 1×512, GPT-2 124M (random init), {ablated} ablated",
        ours,
        reference,
        1e-4,
    )
