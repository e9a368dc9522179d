"""docs/gpt2/smollm2.md's SmolLM2 by hand (snippets/llama_by_hand.py): RMSNorm, RoPE,
SwiGLU, grouped-query attention, the whole forward pass and generation equal
transformers' own, on the converted copy of the GGUF (snippets.hub.smollm2_dir(), which
gives the GGUF's logits exactly: tests/test_snippets_hub.py), with inputs the chapter
does not show.
"""

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from snippets.decoding import generate
from snippets.hub import smollm2_dir
from snippets.llama_by_hand import (
    grouped_query_attention,
    llama_forward,
    rms_norm,
    rope_angles,
    rotate,
    swiglu,
)

INPUTS = "random ids, 2×40, SmolLM2-135M"


@pytest.fixture(scope="module")
def model():
    return AutoModelForCausalLM.from_pretrained(smollm2_dir()).eval()


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(smollm2_dir())


@pytest.fixture(scope="module")
def hidden(model):
    ids = torch.randint(
        model.config.vocab_size, (2, 40), generator=torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        return ids, model(ids, output_hidden_states=True)


def test_the_architecture_is_what_the_chapter_says(model):
    config = model.config
    assert config.model_type == "llama"
    assert (config.num_attention_heads, config.num_key_value_heads, config.head_dim) == (9, 3, 64)
    assert not any(name.endswith("bias") for name, _ in model.named_parameters())
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert not any("position" in name for name, _ in model.named_parameters())


@torch.no_grad()
def test_whole_forward_pass_by_hand_equals_the_library(prove, model, hidden):
    ids, outputs = hidden
    prove(
        "SmolLM2 forward pass by hand (logits)",
        "`LlamaForCausalLM`",
        INPUTS,
        llama_forward(model, ids),
        outputs.logits,
        1e-3,  # float32 logits up to 34, through 30 layers: measured 5.9e-5
    )


@torch.no_grad()
def test_each_layer_by_hand_equals_the_next_hidden_state(prove, model, hidden):
    ids, outputs = hidden
    config = model.config
    angles = rope_angles(config, ids.shape[1])
    ours, theirs = [], []
    for i in (0, 14, 28):  # the last hidden state is after the final norm
        layer, x = model.model.layers[i], outputs.hidden_states[i]
        x = x + grouped_query_attention(
            layer.self_attn, rms_norm(x, layer.input_layernorm), angles, config
        )
        x = x + swiglu(layer.mlp, rms_norm(x, layer.post_attention_layernorm))
        ours.append(x)
        theirs.append(outputs.hidden_states[i + 1])
    prove(
        "SmolLM2 decoder layer by hand",
        "`LlamaDecoderLayer`",
        f"{INPUTS}, layers 0, 14 and 28",
        torch.stack(ours),
        torch.stack(theirs),
        # float32: measured 6.1e-5, one rounding step at a value of 627. The stream has
        # entries of 26,000, where one step is 2e-3; they come out the same so far
        1e-3,
    )


@torch.no_grad()
def test_rms_norm_and_swiglu_equal_their_modules(prove, model, hidden):
    _, outputs = hidden
    layer = model.model.layers[5]
    x = outputs.hidden_states[5]
    inputs = f"{INPUTS}, the input of layer 5"
    prove(
        "RMSNorm by hand",
        "`LlamaRMSNorm`",
        inputs,
        rms_norm(x, layer.input_layernorm),
        layer.input_layernorm(x),
        1e-6,
    )
    prove("SwiGLU by hand", "`LlamaMLP`", inputs, swiglu(layer.mlp, x), layer.mlp(x), 1e-5)


@torch.no_grad()
def test_rope_equals_the_library_and_depends_on_distance_only(prove, model):
    config = model.config
    angles = rope_angles(config, 300)
    x = torch.zeros(1, 300, config.hidden_size)
    cos, sin = model.model.rotary_emb(x, torch.arange(300)[None])
    prove(
        "RoPE angles by hand (their cosines and sines)",
        "`LlamaRotaryEmbedding`",
        "positions 0 to 299, SmolLM2-135M",
        torch.stack([angles.cos(), angles.sin()]),
        torch.stack([cos[0], sin[0]]),
        # float32 angles up to 299 radians, rounded to 3e-5, computed in another order
        # (θ^(-f/D) against 1 / θ^(f/D)): measured 7.6e-6
        1e-4,
    )
    q, k = torch.randn(2, 1, 1, 1, config.head_dim, generator=torch.Generator().manual_seed(1))
    scores = [(rotate(q, angles[m + 7]) * rotate(k, angles[m])).sum() for m in (0, 50, 200)]
    assert torch.allclose(torch.stack(scores), scores[0].expand(3), atol=1e-4)


@torch.no_grad()
def test_the_cache_holds_one_key_and_value_per_group_of_query_heads(model):
    ids = torch.randint(
        model.config.vocab_size, (2, 11), generator=torch.Generator().manual_seed(2)
    )
    cache = model(ids, use_cache=True).past_key_values
    assert len(cache.layers) == 30
    assert cache.layers[0].keys.shape == (2, 3, 11, 64)  # (B, K, T, D): 3 heads, not 9
    assert model.model.layers[0].self_attn.q_proj.weight.shape == (9 * 64, 576)


@pytest.mark.parametrize("settings", [{}, {"do_sample": True, "temperature": 0.7, "top_p": 0.9}])
def test_generate_equals_the_library(model, tokenizer, settings):
    messages = [{"role": "user", "content": "Name a play by Shakespeare."}]
    prompt = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt"
    )
    ids = prompt["input_ids"]
    explicit = {"do_sample": False, "temperature": 1.0, "top_k": 0, "top_p": 1.0} | settings
    torch.manual_seed(0)
    ours = generate(model, ids, max_new_tokens=15, eos_token_id=tokenizer.eos_token_id, **explicit)
    torch.manual_seed(0)
    theirs = model.generate(
        ids,
        max_new_tokens=15,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **explicit,
    )
    assert torch.equal(ours, theirs)


def test_by_hand_follows_the_device_and_dtype_of_the_model(model):
    """SmolLM2's architecture in bfloat16 on the meta device (shapes, no numbers): a tensor
    made on the CPU, or a float32 one meeting bfloat16 weights, raises there as on a GPU."""
    with torch.device("meta"):
        meta = AutoModelForCausalLM.from_config(model.config, dtype=torch.bfloat16).eval()
        ids = torch.zeros(2, 11, dtype=torch.long)
    logits = llama_forward(meta, ids)
    assert logits.shape == (2, 11, model.config.vocab_size)
    assert logits.device.type == "meta" and logits.dtype == torch.bfloat16
