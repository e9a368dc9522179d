"""snippets/looking_inside.py, the logit lens and head ablation of docs/gpt2/looking-inside.md,
against transformers' GPT2LMHeadModel: the lens's last row against the model's logits, and
`ablate_heads` against the model run with a forward pre-hook on each block's `attn.c_proj`
that zeroes the ablated heads' slices of its input. On the book's shipped GPT-2 and on a
randomly initialised GPT-2 of the real 124M size (12 layers of 12 heads), on inputs the page
does not show: other text, random ids, batches, 256 positions (all the shipped model has),
512 at full size.

The tolerance is the forward pass by hand's (tests/test_snippets_gpt2_by_hand.py), 1e-4 on
float32 logits of magnitude up to about 20: with no head ablated, at 256 tokens, the by-hand
logits already differ from the library's by more than 1e-5 (summation order), so any 1e-5
check here would test the forward pass, not the ablation.
"""

import pytest
import torch
from transformers import AutoTokenizer

from snippets.hub import GPT2_SHAKESPEARE
from snippets.looking_inside import ablate_heads, logit_lens, residual_streams
from tests.conftest import random_ids

pytestmark = pytest.mark.usefixtures("no_grad")

ATOL = 1e-4  # float32 logits up to ~20, as the forward pass by hand
OTHER_TEXT = (
    "MIRANDA.\nO, wonder!\nHow many goodly creatures are there here!\n"
    "How beauteous mankind is! O brave new world,\nThat has such people in't!"
)


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


def test_the_lens_last_row_is_the_models_logits_on_other_text(gpt2_shakespeare):
    tokenizer = AutoTokenizer.from_pretrained(GPT2_SHAKESPEARE.repo_id)
    ids = tokenizer(OTHER_TEXT, return_tensors="pt")["input_ids"]
    lens = logit_lens(gpt2_shakespeare, ids)
    assert lens.shape == (5, ids.shape[1], 4096)
    assert torch.allclose(lens[-1], gpt2_shakespeare(ids).logits[0], atol=ATOL)


@pytest.mark.parametrize("length", [1, 256])
def test_the_lens_rows_are_the_hidden_states_through_the_head(gpt2_shakespeare, length):
    """Every row, not only the last: hidden_states[l] through ln_f and lm_head (the last
    hidden state has ln_f applied already)."""
    ids = random_ids(gpt2_shakespeare, 1, length, seed=length)
    outputs = gpt2_shakespeare(ids, output_hidden_states=True)
    *streams, last = outputs.hidden_states
    ln_f, head = gpt2_shakespeare.transformer.ln_f, gpt2_shakespeare.lm_head
    expected = torch.cat([head(ln_f(s)) for s in streams] + [head(last)])  # (L + 1, T, V)
    assert torch.allclose(logit_lens(gpt2_shakespeare, ids), expected, atol=1e-4)
    ours = residual_streams(gpt2_shakespeare, ids)
    assert all(torch.allclose(a, b, atol=1e-4) for a, b in zip(ours[:-1], streams, strict=True))


def test_the_lens_at_the_124m_size(gpt2_124m):
    ids = random_ids(gpt2_124m, 1, 512, seed=4)
    lens = logit_lens(gpt2_124m, ids)
    assert lens.shape == (13, 512, 50257)
    assert torch.allclose(lens[-1], gpt2_124m(ids).logits[0], atol=1e-4)


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
def test_ablation_equals_the_hooked_model(gpt2_shakespeare, heads, batch, length):
    ids = random_ids(gpt2_shakespeare, batch, length, seed=batch * length)
    ours = ablate_heads(gpt2_shakespeare, ids, heads)
    assert ours.shape == (batch, length, 4096)
    assert torch.allclose(ours, hooked_logits(gpt2_shakespeare, ids, heads), atol=ATOL)


def test_no_ablation_is_the_model_and_an_ablation_changes_it(gpt2_shakespeare):
    tokenizer = AutoTokenizer.from_pretrained(GPT2_SHAKESPEARE.repo_id)
    ids = tokenizer(OTHER_TEXT, return_tensors="pt")["input_ids"]
    model_logits = gpt2_shakespeare(ids).logits
    assert torch.allclose(ablate_heads(gpt2_shakespeare, ids, set()), model_logits, atol=ATOL)
    ablated = ablate_heads(gpt2_shakespeare, ids, {(0, 1)})
    assert (ablated - model_logits).abs().max() > 1.0  # not a no-op
    assert torch.allclose(ablated, hooked_logits(gpt2_shakespeare, ids, {(0, 1)}), atol=ATOL)


@pytest.mark.parametrize(
    "heads",
    [{(5, 7)}, {(0, 0), (6, 11), (11, 3)}, {(9, h) for h in range(12)}],
    ids=["one head", "three layers", "all of layer 9"],
)
def test_ablation_equals_the_hooked_model_at_the_124m_size(gpt2_124m, heads):
    ids = random_ids(gpt2_124m, 1, 512, seed=len(heads))
    ours = ablate_heads(gpt2_124m, ids, heads)
    reference = hooked_logits(gpt2_124m, ids, heads)
    assert not torch.allclose(ours, gpt2_124m(ids).logits, atol=1e-3)  # the heads mattered
    assert torch.allclose(ours, reference, atol=1e-4)
