"""Part I's forward pass by hand (snippets/bert_by_hand.py) against transformers' BertModel.

Every input here is one no page of docs/bert/ shows. The models: MiniLM's real
weights, and bert-base's full size (BertConfig() defaults) with random weights
drawn from a fixed seed, both with eager attention.

Tolerances, float32, each measured (maxima over the inputs of these tests):

- ATOL = 1e-5 for every hidden state, pooler output and attention probability of
  a real token. Measured: 3.8e-6 on MiniLM, 2.9e-6 on bert-base.
- LONG_ATOL = 2e-5 for MiniLM at 512 tokens. Measured: 5.1e-6 on LONG_TEXTS[0];
  5.9e-6 on LONG_TEXTS[1] and 9.8e-6 on a third text. That is float32, not a bug:
  against the library run in float64, the library's float32 result and ours are
  each up to 7e-6 off, in different directions, so they can be twice that apart;
  each is within ATOL of exact, hence within 2 × ATOL of the other
  (test_the_looser_tolerances_are_float32s_own).
- PADDING_ATOL = 5e-4 for what MiniLM computes at [PAD] positions (their hidden
  states and their rows of attention), which nothing downstream reads. Measured:
  9.8e-5. MiniLM amplifies rounding at those positions: there the library's own
  float32 result is up to 1e-4 off its float64 result, ten times ATOL, and ours is
  as close to float64 as the library's (same test). bert-base with random weights
  shows no such effect and meets ATOL everywhere.
"""

import copy
import inspect
import math

import pytest
import torch
from transformers import (
    AutoModel,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    BertConfig,
    BertForPreTraining,
    BertModel,
)

from snippets import bert_by_hand as bh
from snippets.bert_parameters import parameters_by_formula, parameters_by_module
from snippets.figures.bert import record_calls
from snippets.models import MINILM

ATOL = 1e-5
LONG_ATOL = 2e-5
PADDING_ATOL = 5e-4

SENTENCE = "Seven tensors later, the encoder has read every token at once."
PAIRS = (
    ["Is the model in eval mode?", "How long is a sequence?", "Who pads?"],
    ["Yes, so dropout does nothing.", "At most 512 tokens, [CLS] and [SEP] included.", "We do."],
)
BATCH = [
    "A short one.",
    "Padding fills the rest of the rectangle with zeros that nobody reads.",
    "Mid-length sentences, with punctuation; and a semicolon.",
    "Ok",
]
LONG_TEXTS = [
    "Now is the winter of our discontent made glorious summer by this sun of York. " * 40,
    "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer. " * 40,
]


@pytest.fixture(autouse=True)
def _no_grad():
    with torch.no_grad():
        yield


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(MINILM.repo_id)


@pytest.fixture(scope="module")
def minilm():
    return AutoModel.from_pretrained(MINILM.repo_id, attn_implementation="eager")


@pytest.fixture(scope="module")
def bert_base():
    torch.manual_seed(0)
    return BertModel(BertConfig(attn_implementation="eager")).eval()


def run_both(model, batch):
    library = model(**batch, output_hidden_states=True, output_attentions=True)
    ours = bh.forward(
        model, batch["input_ids"], batch.get("attention_mask"), batch.get("token_type_ids")
    )
    return ours, library


def largest_gaps(ours, library, real):
    """The largest |ours - library| at real tokens and at padding positions, over all outputs."""
    at_real, at_padding = 0.0, 0.0
    pairs = [*zip(ours.hidden_states, library.hidden_states, strict=True),
             (ours.last_hidden_state, library.last_hidden_state)]  # fmt: skip
    for a, b in pairs:
        gap = (a - b).abs().amax(dim=-1)  # (B, T)
        at_real = max(at_real, gap[real].max().item())
        at_padding = max(at_padding, gap[~real].max().item() if (~real).any() else 0.0)
    for a, b in zip(ours.attentions, library.attentions, strict=True):
        gap = (a - b).abs().amax(dim=(1, 3))  # (B, T): per query row
        at_real = max(at_real, gap[real].max().item())
        at_padding = max(at_padding, gap[~real].max().item() if (~real).any() else 0.0)
    return at_real, at_padding


def assert_parity(model, batch, atol=ATOL, padding_atol=ATOL):
    ours, library = run_both(model, batch)
    L = model.config.num_hidden_layers
    assert len(ours.hidden_states) == len(library.hidden_states) == L + 1
    assert len(ours.attentions) == len(library.attentions) == L
    assert torch.allclose(ours.pooler_output, library.pooler_output, atol=atol)  # reads [CLS] only
    real = batch["attention_mask"].bool()
    at_real, at_padding = largest_gaps(ours, library, real)
    assert at_real <= atol, f"{at_real:.2e} at real tokens"
    assert at_padding <= padding_atol, f"{at_padding:.2e} at padding positions"


# ------------------------------------------------------------------ MiniLM, real weights


def test_one_sentence(minilm, tokenizer):
    assert_parity(minilm, tokenizer(SENTENCE, return_tensors="pt"))


def test_sentence_pairs_with_token_types(minilm, tokenizer):
    batch = tokenizer(*PAIRS, padding=True, return_tensors="pt")
    assert batch["token_type_ids"].any()
    assert_parity(minilm, batch, padding_atol=PADDING_ATOL)


def test_padded_batch(minilm, tokenizer):
    batch = tokenizer(BATCH, padding=True, return_tensors="pt")
    assert (batch["attention_mask"] == 0).any()
    assert_parity(minilm, batch, padding_atol=PADDING_ATOL)


def test_defaults_mean_no_padding_and_one_sentence(minilm, tokenizer):
    ids = tokenizer(SENTENCE, return_tensors="pt")["input_ids"]
    ours = bh.forward(minilm, ids)
    assert torch.allclose(
        ours.last_hidden_state, minilm(input_ids=ids).last_hidden_state, atol=ATOL
    )


def test_512_tokens(minilm, tokenizer):
    batch = tokenizer(LONG_TEXTS[0], truncation=True, return_tensors="pt")
    assert batch["input_ids"].shape == (1, 512)
    assert_parity(minilm, batch, atol=LONG_ATOL)


def largest_error(results, exact, select):
    """The largest |result - exact| over all hidden states, at the selected positions."""
    return max(
        (a.double() - b).abs().amax(dim=-1)[select].max().item()
        for a, b in zip(results.hidden_states, exact.hidden_states, strict=True)
    )


def test_the_looser_tolerances_are_float32s_own(minilm, tokenizer):
    """Why LONG_ATOL and PADDING_ATOL are what they are, against the library in float64.

    At 512 tokens, the library's float32 result and ours are each within ATOL of the
    float64 result, so within 2 × ATOL = LONG_ATOL of each other. At MiniLM's padding
    positions the library's own float32 result misses ATOL by far, so no float32
    code could meet it there; both are within PADDING_ATOL / 2, so within PADDING_ATOL
    of each other.
    """
    exact_model = copy.deepcopy(minilm).double()
    long = tokenizer(LONG_TEXTS[1], truncation=True, return_tensors="pt")
    padded = tokenizer(BATCH, padding=True, return_tensors="pt")
    ours, library = run_both(minilm, long)
    exact = exact_model(**long, output_hidden_states=True)
    real = long["attention_mask"].bool()
    assert largest_error(library, exact, real) <= ATOL  # measured 6.0e-6
    assert largest_error(ours, exact, real) <= ATOL  # measured 4.8e-6

    ours, library = run_both(minilm, padded)
    exact = exact_model(**padded, output_hidden_states=True)
    padding = ~padded["attention_mask"].bool()
    assert largest_error(library, exact, padding) > 5 * ATOL  # measured 8.5e-5
    assert largest_error(library, exact, padding) <= PADDING_ATOL / 2
    assert largest_error(ours, exact, padding) <= PADDING_ATOL / 2  # measured 5.2e-5


def test_padding_keys_get_zero_probability(minilm, tokenizer):
    batch = tokenizer(BATCH, padding=True, return_tensors="pt")
    ours = bh.forward(minilm, batch["input_ids"], batch["attention_mask"])
    is_padding = batch["attention_mask"] == 0  # (B, T)
    for probabilities in ours.attentions:  # (B, H, T, T)
        keys_masked = is_padding[:, None, None, :].expand_as(probabilities)
        assert probabilities[keys_masked].max() == 0  # exactly: exp(finfo.min - max) is 0
        assert torch.allclose(probabilities.sum(-1), torch.ones(()), atol=1e-6)


def test_padding_does_not_change_the_real_tokens(minilm, tokenizer):
    alone = tokenizer(BATCH[0], return_tensors="pt")
    padded = tokenizer(BATCH, padding=True, return_tensors="pt")
    T = alone["input_ids"].shape[1]
    by_itself = bh.forward(minilm, alone["input_ids"])
    in_batch = bh.forward(minilm, padded["input_ids"], padded["attention_mask"])
    assert torch.allclose(
        in_batch.last_hidden_state[0, :T], by_itself.last_hidden_state[0], atol=ATOL
    )
    assert torch.allclose(in_batch.pooler_output[0], by_itself.pooler_output[0], atol=ATOL)


# ------------------------------------------------------------------ bert-base, full size


def test_full_size_sentence_pairs(bert_base, tokenizer):
    batch = tokenizer(*PAIRS, padding=True, return_tensors="pt")
    assert_parity(bert_base, batch)


def test_full_size_padded_batch(bert_base, tokenizer):
    assert_parity(bert_base, tokenizer(BATCH, padding=True, return_tensors="pt"))


# ------------------------------------------------------------------ any BertConfig


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"hidden_act": "relu"},
        {"hidden_act": "gelu_new"},
        {"num_attention_heads": 1},
        {"num_attention_heads": 8, "type_vocab_size": 3, "layer_norm_eps": 1e-5},
    ],
    ids=lambda changes: ",".join(f"{k}={v}" for k, v in changes.items()) or "defaults",
)
def test_any_config(changes):
    sizes = {"hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
             "intermediate_size": 96, "vocab_size": 500, "max_position_embeddings": 40}  # fmt: skip
    config = BertConfig(**(sizes | changes), attn_implementation="eager")
    torch.manual_seed(1)
    model = BertModel(config).eval()
    input_ids = torch.randint(0, config.vocab_size, (3, 17))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 12:] = attention_mask[2, 5:] = 0
    token_type_ids = torch.randint(0, config.type_vocab_size, (3, 17))
    batch = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "token_type_ids": token_type_ids,
    }
    assert_parity(model, batch)


def test_a_model_without_pooler(tokenizer):
    torch.manual_seed(2)
    config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, attn_implementation="eager")  # fmt: skip
    model = BertModel(config, add_pooling_layer=False).eval()
    batch = tokenizer(BATCH, padding=True, return_tensors="pt")
    ours = bh.forward(model, batch["input_ids"], batch["attention_mask"])
    assert ours.pooler_output is None
    library = model(**batch)
    assert torch.allclose(ours.last_hidden_state, library.last_hidden_state, atol=ATOL)


def test_refuses_what_it_does_not_reproduce(minilm, tokenizer):
    ids = tokenizer(SENTENCE, return_tensors="pt")["input_ids"]
    minilm.train()
    try:
        with pytest.raises(ValueError, match="dropout"):
            bh.forward(minilm, ids)
    finally:
        minilm.eval()
    decoder = BertModel(BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                   intermediate_size=64, is_decoder=True)).eval()  # fmt: skip
    with pytest.raises(ValueError, match="causal"):
        bh.forward(decoder, ids)


# ------------------------------------------------------------------ the seed tutorials' errors


def test_the_feed_forward_reads_the_attention_output(minilm, tokenizer):
    """Seed error 1: the FFN takes the attention block's output (after the projection,
    the residual and LayerNorm), not the output of attention.self."""
    batch = tokenizer(BATCH, padding=True, return_tensors="pt")
    library = minilm(**batch, output_hidden_states=True)
    mask = bh.padding_mask(batch["attention_mask"], torch.float32)
    real = batch["attention_mask"].bool()
    H = minilm.config.num_attention_heads
    for i, layer in enumerate(minilm.encoder.layer):
        x = library.hidden_states[i]
        context, _ = bh.self_attention(layer.attention.self, x, mask, H)
        h = bh.attention_output(layer.attention.output, context, x)
        target = library.hidden_states[i + 1][real]
        assert torch.allclose(bh.feed_forward(layer, h)[real], target, atol=ATOL)
        assert (bh.feed_forward(layer, context)[real] - target).abs().max() > 1.0


def test_version_5_removed_the_apis_old_tutorials_use(minilm, tokenizer):
    """Seed error 2: no get_extended_attention_mask, no head_mask, no
    find_pruneable_heads_and_indices, and a layer returns a tensor, not a tuple."""
    import transformers.pytorch_utils

    x = minilm(**tokenizer(BATCH, padding=True, return_tensors="pt"), output_hidden_states=True)
    returned = minilm.encoder.layer[0](x.hidden_states[0])
    assert isinstance(returned, torch.Tensor)
    assert returned[0].shape == x.hidden_states[0].shape[1:]  # [0] is the first sequence
    assert not hasattr(minilm, "get_extended_attention_mask")
    assert "head_mask" not in inspect.signature(minilm.forward).parameters
    assert "head_mask" not in inspect.signature(minilm.encoder.layer[0].forward).parameters
    assert not hasattr(transformers.pytorch_utils, "find_pruneable_heads_and_indices")


def test_the_pooler_is_dense_and_tanh_on_cls(minilm, tokenizer):
    """Seed error 4: the pooler has no attention; it reads the [CLS] vector only."""
    batch = tokenizer(*PAIRS, padding=True, return_tensors="pt")
    last = minilm(**batch).last_hidden_state
    assert sorted(name for name, _ in minilm.pooler.named_parameters()) == [
        "dense.bias",
        "dense.weight",
    ]
    torch.manual_seed(3)
    noisy = last.clone()
    noisy[:, 1:] = 10 * torch.randn_like(noisy[:, 1:])
    assert torch.equal(minilm.pooler(noisy), minilm.pooler(last))
    assert torch.equal(bh.pool(minilm.pooler, noisy), bh.pool(minilm.pooler, last))
    expected = torch.tanh(last[:, 0] @ minilm.pooler.dense.weight.T + minilm.pooler.dense.bias)
    assert torch.allclose(minilm.pooler(last), expected, atol=ATOL)


def test_hidden_states_0_already_holds_positions_and_token_types(minilm, tokenizer):
    """Seed error 5: adding the position and segment embeddings to hidden_states[0]
    counts them twice."""
    batch = tokenizer(*PAIRS, padding=True, return_tensors="pt")
    first = minilm(**batch, output_hidden_states=True).hidden_states[0]
    by_hand = bh.embed(minilm.embeddings, batch["input_ids"], batch["token_type_ids"])
    assert torch.allclose(by_hand, first, atol=ATOL)
    tables = minilm.embeddings
    T = batch["input_ids"].shape[1]
    twice = (first + tables.position_embeddings.weight[:T]
             + tables.token_type_embeddings.weight[batch["token_type_ids"]])  # fmt: skip
    assert (twice - first).abs().max() > 0.5


def test_layer_i_scales_by_the_head_size_with_its_own_weights(minilm, tokenizer):
    """Seed error 6: layer 1's attention is model.encoder.layer[1] on hidden_states[1],
    scaled by √D; not √C, and not fresh random Q/K/V on the last hidden state."""
    batch = tokenizer(SENTENCE, return_tensors="pt")
    library = minilm(**batch, output_hidden_states=True, output_attentions=True)
    attention = minilm.encoder.layer[1].attention.self
    H, C = minilm.config.num_attention_heads, minilm.config.hidden_size
    x = library.hidden_states[1]
    q, k = (bh.split_heads(bh.linear(x, m), H) for m in (attention.query, attention.key))
    for scale, is_bert in [(math.sqrt(C // H), True), (math.sqrt(C), False)]:
        probabilities = torch.softmax(q @ k.transpose(-2, -1) / scale, dim=-1)
        assert torch.allclose(probabilities, library.attentions[1], atol=ATOL) is is_bert
    torch.manual_seed(4)
    fresh = torch.nn.Linear(C, C), torch.nn.Linear(C, C)
    last = library.last_hidden_state
    q, k = (bh.split_heads(bh.linear(last, m), H) for m in fresh)
    random_probabilities = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(C // H), dim=-1)
    assert not torch.allclose(random_probabilities, library.attentions[1], atol=1e-2)


def test_hidden_states_i_is_the_output_of_layer_i_minus_1(minilm, tokenizer):
    """Seed error 7: hidden_states[0] is the embeddings; hidden_states[i] is the output of
    model.encoder.layer[i - 1], not of layer[i]."""
    batch = tokenizer(SENTENCE, return_tensors="pt")
    library = minilm(**batch, output_hidden_states=True)
    layers = minilm.encoder.layer
    assert len(library.hidden_states) == len(layers) + 1
    assert torch.allclose(
        library.hidden_states[0], minilm.embeddings(input_ids=batch["input_ids"]), atol=ATOL
    )
    for i in range(1, len(layers) + 1):
        output = layers[i - 1](library.hidden_states[i - 1])
        assert torch.allclose(output, library.hidden_states[i], atol=ATOL)
        if i < len(layers):
            assert not torch.allclose(output, library.hidden_states[i + 1], atol=1e-2)
    assert torch.equal(library.hidden_states[-1], library.last_hidden_state)


def untrained_classifier(seed):
    torch.manual_seed(seed)
    return AutoModelForSequenceClassification.from_pretrained(
        MINILM.repo_id, num_labels=2, attn_implementation="eager"
    )


def test_an_untrained_head_predicts_nothing(tokenizer):
    """Seed error 11: a fresh classification head's "confidence" is an artifact of its
    random initialization: about 0.5, and its answer changes with the seed."""
    texts = ["An absolute triumph of a film.", "Utterly boring from start to end."]
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    answers = set()
    for seed in range(8):
        model = untrained_classifier(seed)
        # the page draws the same heads by hand: N(0, initializer_range²) weights, zero bias
        torch.manual_seed(seed)
        drawn = torch.randn(2, model.config.hidden_size) * model.config.initializer_range
        assert torch.equal(model.classifier.weight, drawn)
        assert not model.classifier.bias.any()
        result = model(**batch, labels=torch.tensor([1, 0]))
        probabilities = result.logits.softmax(dim=-1)
        assert (probabilities - 0.5).abs().max() < 0.03
        assert abs(result.loss.item() - math.log(2)) < 0.03  # a coin flip's loss
        answers.add(tuple(probabilities.argmax(dim=-1).tolist()))
    assert len(answers) > 1  # the seed decides, not the text


def test_a_label_has_shape_b_and_dtype_long(tokenizer):
    """Seed error 14: labels of shape (B,) and dtype long; (B, 1) makes
    CrossEntropyLoss raise a RuntimeError."""
    model = untrained_classifier(0)
    batch = tokenizer(BATCH, padding=True, return_tensors="pt")
    labels = torch.tensor([0, 1, 1, 0])
    result = model(**batch, labels=labels)
    assert labels.shape == (len(BATCH),) and labels.dtype == torch.long
    assert torch.allclose(result.loss, torch.nn.functional.cross_entropy(result.logits, labels))
    with pytest.raises(RuntimeError, match="1D target tensor expected"):
        torch.nn.CrossEntropyLoss()(result.logits, labels.unsqueeze(1))
    pooled = bh.forward(model.bert, batch["input_ids"], batch["attention_mask"]).pooler_output
    assert torch.allclose(bh.linear(pooled, model.classifier), result.logits, atol=ATOL)


def test_attention_probabilities_need_eager(tokenizer):
    """Seed error 16: the default attention (SDPA) returns no probabilities."""
    batch = tokenizer(SENTENCE, return_tensors="pt")
    default = AutoModel.from_pretrained(MINILM.repo_id)
    eager = AutoModel.from_pretrained(MINILM.repo_id, attn_implementation="eager")
    assert default.config._attn_implementation == "sdpa"
    assert not default(**batch, output_attentions=True).attentions
    with_eager = eager(**batch, output_attentions=True)
    assert len(with_eager.attentions) == eager.config.num_hidden_layers
    assert torch.allclose(with_eager.attentions[0].sum(-1), torch.ones(()), atol=1e-6)
    assert torch.allclose(
        default(**batch).last_hidden_state, with_eager.last_hidden_state, atol=ATOL
    )


# ------------------------------------------------------------------ pretraining heads


def test_pretraining_heads_by_hand(minilm, tokenizer):
    torch.manual_seed(5)
    model = BertForPreTraining(minilm.config).eval()
    model.bert.load_state_dict(minilm.state_dict())
    decoder = model.cls.predictions.decoder
    embeddings = model.bert.embeddings.word_embeddings
    assert decoder.weight is embeddings.weight  # tied: one tensor, used twice
    assert decoder.bias is model.cls.predictions.bias
    batch = tokenizer(*PAIRS, padding=True, return_tensors="pt")
    library = model(**batch)
    ours = bh.forward(
        model.bert, batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
    )
    transform = model.cls.predictions.transform
    transformed = bh.layer_norm(bh.gelu(bh.linear(ours.last_hidden_state, transform.dense)),
                                transform.LayerNorm)  # fmt: skip
    scores = transformed @ embeddings.weight.T + decoder.bias
    real = batch["attention_mask"].bool()
    assert torch.allclose(scores[real], library.prediction_logits[real], atol=ATOL)
    next_sentence = bh.linear(ours.pooler_output, model.cls.seq_relationship)
    assert torch.allclose(next_sentence, library.seq_relationship_logits, atol=ATOL)


# ------------------------------------------------------------------ the model chapter and figures


@pytest.mark.parametrize(
    "config",
    [BertConfig(), BertConfig(hidden_size=96, num_hidden_layers=3, num_attention_heads=6,
                              intermediate_size=200, vocab_size=777, type_vocab_size=4)],
    ids=["bert-base", "odd sizes"],
)  # fmt: skip
def test_parameter_counts_follow_from_the_config(config):
    with torch.device("meta"):  # shapes only
        model = BertModel(config)
    by_module = parameters_by_module(model)
    assert parameters_by_formula(config) == by_module
    assert sum(by_module.values()) == sum(p.numel() for p in model.parameters())


def test_the_diagrams_shapes_come_from_the_model(minilm, tokenizer):
    """The flow diagrams are drawn from forward hooks: they see the real shapes, and the
    hooks are gone afterwards."""
    batch = tokenizer(*PAIRS, padding=True, return_tensors="pt")
    hooks_before = [len(module._forward_hooks) for module in minilm.modules()]
    calls = record_calls(minilm, batch)
    B, T = batch["input_ids"].shape
    C, H = minilm.config.hidden_size, minilm.config.num_attention_heads
    assert calls["embeddings"].outputs == ((B, T, C),)
    assert calls["embeddings.position_embeddings"].outputs == ((1, T, C),)
    for i in range(minilm.config.num_hidden_layers):
        assert calls[f"encoder.layer.{i}"].outputs == ((B, T, C),)
        assert calls[f"encoder.layer.{i}.attention.self"].outputs == ((B, T, C), (B, H, T, T))
        assert calls[f"encoder.layer.{i}.intermediate"].outputs == (
            (B, T, minilm.config.intermediate_size),
        )
    assert calls["pooler"].outputs == ((B, C),)
    # the library keeps hooks of its own (for output_hidden_states); ours are all removed
    assert [len(module._forward_hooks) for module in minilm.modules()] == hooks_before
