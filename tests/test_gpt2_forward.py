"""docs/gpt2/forward.md's warning boxes and its tied head, pinned on the book's shipped
GPT-2 against transformers' GPT2LMHeadModel and its checkpoint file: a Conv1D weight is
stored (in, out), transposed with respect to nn.Linear; `hidden_states[-1]` comes after
the final LayerNorm; and lm_head is the token embedding itself, stored once. The forward
pass by hand is checked against the library, on inputs the page does not show, in
tests/test_snippets_gpt2_by_hand.py."""

import torch
import torch.nn.functional as F
from safetensors import safe_open

from snippets.gpt2_by_hand import conv1d
from snippets.hub import GPT2_SHAKESPEARE
from tests.inputs import random_ids


@torch.no_grad()
def test_conv1d_is_a_transposed_linear(prove, gpt2_shakespeare):
    """docs/gpt2/forward.md, warning "GPT-2's weights are transposed with respect to
    `nn.Linear`": a Conv1D weight is (in, out), and equals nn.Linear's only transposed."""
    layer = gpt2_shakespeare.transformer.h[1].mlp.c_fc
    C = gpt2_shakespeare.config.n_embd
    x = torch.randn(2, 5, C, generator=torch.Generator().manual_seed(5))
    assert layer.weight.shape == (C, 4 * C)  # (in, out)
    inputs = "random 2×5 vectors, book's GPT-2, block 1's `mlp.c_fc`"
    # float32, values up to 16: measured 3.3e-6 (under compatible-1-thread; 0 as-is)
    prove("Conv1D by hand", "`Conv1D`", inputs, conv1d(x, layer), layer(x), 5e-5)
    prove(
        "`F.linear` with Conv1D's weight transposed",
        "`Conv1D`",
        inputs,
        F.linear(x, layer.weight.T, layer.bias),
        layer(x),
        1e-5,
    )


@torch.no_grad()
def test_the_last_hidden_state_is_after_the_final_layer_norm(prove, gpt2_shakespeare):
    """docs/gpt2/forward.md, warning "`hidden_states[-1]` is after the final LayerNorm": the
    head applied to it gives the logits, with nothing in between."""
    ids = random_ids(gpt2_shakespeare, 1, 10, seed=7)
    outputs = gpt2_shakespeare(ids, output_hidden_states=True)
    assert len(outputs.hidden_states) == gpt2_shakespeare.config.n_layer + 1
    last = outputs.hidden_states[-1]  # (B, T, C), already normalized by ln_f
    prove(
        "tied head by hand on `hidden_states[-1]`",
        "`GPT2LMHeadModel` (logits)",
        "random ids, 1×10, book's GPT-2",
        last @ gpt2_shakespeare.lm_head.weight.T,
        outputs.logits,
        1e-4,
    )


def test_lm_head_is_tied_and_stored_once(gpt2_shakespeare):
    """docs/gpt2/forward.md, "The head, tied to the embeddings": one tensor, and the
    checkpoint stores it once."""
    assert gpt2_shakespeare.lm_head.weight is gpt2_shakespeare.transformer.wte.weight
    with safe_open(GPT2_SHAKESPEARE.snapshot_dir() / "model.safetensors", "pt") as stored:
        names = set(stored.keys())
    assert "transformer.wte.weight" in names and "lm_head.weight" not in names


@torch.no_grad()
def test_warning_attention_probabilities_need_the_eager_attention_implementation(prove):
    """docs/gpt2/forward.md, warning "Attention probabilities need the eager attention
    implementation": the default (SDPA) returns no probabilities and no error; eager returns
    one (B, H, T, T) tensor per block, each row summing to 1, with the same logits."""
    from transformers import GPT2LMHeadModel

    default = GPT2LMHeadModel.from_pretrained(GPT2_SHAKESPEARE.repo_id)
    eager = GPT2LMHeadModel.from_pretrained(GPT2_SHAKESPEARE.repo_id, attn_implementation="eager")
    ids = random_ids(eager, 2, 12, seed=11)
    with_sdpa = default(ids, output_attentions=True)
    with_eager = eager(ids, output_attentions=True)
    assert default.config._attn_implementation == "sdpa"
    assert not with_sdpa.attentions or all(a is None for a in with_sdpa.attentions)
    assert len(with_eager.attentions) == eager.config.n_layer
    assert all(a.shape == (2, eager.config.n_head, 12, 12) for a in with_eager.attentions)
    assert torch.allclose(with_eager.attentions[0].sum(dim=-1), torch.ones(2, 4, 12), atol=1e-5)
    prove(
        "`GPT2LMHeadModel` with SDPA attention, the default (logits)",
        "`GPT2LMHeadModel` with eager attention",
        "random ids, 2×12, book's GPT-2",
        with_sdpa.logits,
        with_eager.logits,
        5e-4,  # float32 logits up to 20, the residual stream up to 400: measured 2.2e-5
    )
