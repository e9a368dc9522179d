"""docs/assistant/chat-format.md and snippets/chat_format.py: SmolLM2's chat template by hand
against `apply_chat_template`, as a string and as ids, and the hand-built assistant mask
against the library's (the tagged copy of the template) and TRL's `SFTTrainer`, on
conversations the page does not show: a system message or none, one that is not first, a
conversation that opens with the assistant, empty contents, unicode, content that starts
with whitespace (its first token merges with the header's newline, and both masks count
the merged token), Jinja-like braces, two messages of about 3,000 tokens each. Every
equality is exact: strings with ==, ids and masks with a tolerance of 0. Then the
generation loop stopped at <|im_end|> against `model.generate`, and the page's three
warnings.
"""

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from snippets.chat_format import (
    chatml_pieces,
    conversation,
    default_system_prompt,
    encode,
    render,
    with_generation_tags,
)
from snippets.decoding import generate
from snippets.hub import smollm2_dir

LONG = " ".join(["Full fathom five thy father lies; of his bones are coral made."] * 200)
CONVERSATIONS = {
    "one question": [{"role": "user", "content": "Which island is this?"}],
    "a system message, two exchanges": [
        {"role": "system", "content": "You are Prospero's book."},
        {"role": "user", "content": "Who is Caliban?"},
        {"role": "assistant", "content": "Sycorax's son."},
        {"role": "user", "content": "And Ariel?"},
        {"role": "assistant", "content": "A spirit of the air."},
    ],
    "a system message that is not first": [
        {"role": "user", "content": "Hello."},
        {"role": "system", "content": "Answer in French."},
        {"role": "assistant", "content": "Bonjour."},
    ],
    "opens with the assistant": [
        {"role": "assistant", "content": "How can I help?"},
        {"role": "user", "content": "Tell me a line."},
    ],
    "empty contents": [
        {"role": "user", "content": ""},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": ""},
    ],
    "an empty system message": [
        {"role": "system", "content": ""},
        {"role": "user", "content": "Anything?"},
        {"role": "assistant", "content": "Nothing."},
    ],
    "unicode": [
        {"role": "user", "content": "¿Dónde está Milán? 日本語で 🌊"},
        {"role": "assistant", "content": "À Milan, naturellement ✓ 🏝️"},
    ],
    "content that starts with whitespace": [
        {"role": "user", "content": "  indented"},
        {"role": "assistant", "content": "  two spaces"},
        {"role": "user", "content": "\n\nnewlines"},
        {"role": "assistant", "content": "\n\nnewlines too"},
        {"role": "user", "content": " "},
        {"role": "assistant", "content": "\n"},
    ],
    "newlines inside and at the end": [
        {"role": "user", "content": "Two lines?\nYes."},
        {"role": "assistant", "content": "One.\n\nTwo.\n"},
    ],
    "Jinja-like braces in the content": [
        {"role": "user", "content": "{{ messages }} {% if x %}"},
        {"role": "assistant", "content": "{% endif %} }}"},
    ],
    "two user messages in a row": [
        {"role": "user", "content": "First."},
        {"role": "user", "content": "Second."},
        {"role": "assistant", "content": "Both read."},
    ],
    "two messages of about 3,000 tokens each": [
        {"role": "user", "content": LONG},
        {"role": "assistant", "content": LONG},
    ],
}


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(smollm2_dir())


@pytest.fixture(scope="module")
def model():
    return AutoModelForCausalLM.from_pretrained(smollm2_dir()).eval()


@pytest.fixture(scope="module")
def tagged(tokenizer):
    return with_generation_tags(tokenizer.chat_template)


def test_the_long_conversation_is_long(tokenizer):
    for message in CONVERSATIONS["two messages of about 3,000 tokens each"]:
        length = len(tokenizer(message["content"], add_special_tokens=False)["input_ids"])
        assert 2500 < length < 3500, length


def test_the_untagged_template_gives_a_mask_of_zeros_and_trl_refuses_it(tmp_path, tokenizer):
    """The page: the library's mask with SmolLM2's own template is all zeros (a warning is
    logged, nothing raised); TRL's SFTTrainer(assistant_only_loss=True) refuses the
    template (and accepts the tagged copy: test_the_mask_equals_trl_sft_trainers_labels)."""
    from datasets import Dataset
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl import SFTConfig, SFTTrainer

    for messages in [conversation, *CONVERSATIONS.values()]:
        out = tokenizer.apply_chat_template(messages, return_assistant_tokens_mask=True)
        assert len(out["assistant_masks"]) == len(out["input_ids"])
        assert not any(out["assistant_masks"])
    tiny = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=8,
        )
    )
    args = SFTConfig(
        output_dir=str(tmp_path), use_cpu=True, report_to="none", assistant_only_loss=True
    )
    with pytest.raises(ValueError, match="patching is not supported for this template"):
        SFTTrainer(
            model=tiny,
            args=args,
            train_dataset=Dataset.from_list([{"messages": conversation}]),
            processing_class=AutoTokenizer.from_pretrained(smollm2_dir()),
        )


def test_the_default_system_prompt_is_read_from_the_template(tokenizer):
    template = tokenizer.chat_template
    system_prompt = default_system_prompt(template)
    assert system_prompt == "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    for messages in CONVERSATIONS.values():
        if messages[0]["role"] != "system":
            explicit = [{"role": "system", "content": system_prompt}, *messages]
            assert render(messages, system_prompt) == render(explicit, system_prompt)
            assert tokenizer.apply_chat_template(
                messages, tokenize=False
            ) == tokenizer.apply_chat_template(explicit, tokenize=False)


@pytest.mark.parametrize("add_generation_prompt", [False, True])
def test_render_equals_apply_chat_template_as_a_string_and_as_ids(
    prove, tokenizer, add_generation_prompt
):
    system_prompt = default_system_prompt(tokenizer.chat_template)
    ours, theirs = [], []
    for name, messages in CONVERSATIONS.items():
        text = render(messages, system_prompt, add_generation_prompt)
        library = tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )
        assert text == library, name
        ids = encode(tokenizer, messages, add_generation_prompt)["input_ids"]
        assert ids.tolist() == tokenizer(text, add_special_tokens=False)["input_ids"], name
        ours.append(ids)
        theirs.append(
            torch.tensor(
                tokenizer.apply_chat_template(
                    messages, add_generation_prompt=add_generation_prompt
                )["input_ids"]
            )
        )
    prove(
        "ChatML by hand (ids)",
        "`apply_chat_template`",
        f"{len(CONVERSATIONS)} conversations, add_generation_prompt={add_generation_prompt}",
        torch.cat(ours),
        torch.cat(theirs),
        0,
    )


def test_the_tagged_copy_renders_the_same_strings(tokenizer, tagged):
    assert "{% generation %}" in tagged and "{% generation %}" not in tokenizer.chat_template
    for messages in [conversation, *CONVERSATIONS.values()]:
        for add_generation_prompt in (False, True):
            assert tokenizer.apply_chat_template(
                messages,
                chat_template=tagged,
                tokenize=False,
                add_generation_prompt=add_generation_prompt,
            ) == tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=add_generation_prompt
            )


def test_the_mask_equals_the_librarys_with_the_tagged_template(prove, tokenizer, tagged):
    ours, theirs = [], []
    for messages in CONVERSATIONS.values():
        for add_generation_prompt in (False, True):
            encoded = encode(tokenizer, messages, add_generation_prompt)
            library = tokenizer.apply_chat_template(
                messages,
                chat_template=tagged,
                add_generation_prompt=add_generation_prompt,
                return_assistant_tokens_mask=True,
                return_dict=True,
            )
            assert encoded["input_ids"].tolist() == library["input_ids"]
            ours.append(encoded["assistant_mask"].long())
            theirs.append(torch.tensor(library["assistant_masks"]))
    prove(
        "assistant mask by hand",
        "`apply_chat_template(return_assistant_tokens_mask=True)`, tagged template",
        f"{len(CONVERSATIONS)} conversations, with and without the generation prompt",
        torch.cat(ours),
        torch.cat(theirs),
        0,
    )


def test_each_counted_span_is_a_reply_and_its_im_end(tokenizer):
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    for messages in CONVERSATIONS.values():
        encoded = encode(tokenizer, messages)
        ids, mask = encoded["input_ids"], encoded["assistant_mask"]
        replies = sum(m["role"] == "assistant" for m in messages)
        assert int((mask & (ids == end)).sum()) == replies  # each reply's <|im_end|> counted
        # each counted span starts right after the header's `ass istant`: on `Ċ` alone, or
        # on the reply's first token when that token holds the header's newline
        tokens = tokenizer.convert_ids_to_tokens(ids)
        for s in (mask[1:] & ~mask[:-1]).nonzero()[:, 0].tolist():  # a span starts at s + 1
            if tokens[s] == "Ċ":
                assert tokens[s - 2 : s] == ["ass", "istant"], (messages, s)
            else:
                assert tokens[s - 1 : s + 1] == ["ass", "istant"], (messages, s)
                assert tokens[s + 1].startswith("Ċ") and tokens[s + 1] != "Ċ", (messages, s)
        roles = [
            role for role, counted in zip(encoded["roles"], mask.tolist(), strict=True) if counted
        ]
        assert set(roles) <= {"assistant"}
    pieces = chatml_pieces(conversation, "s", add_generation_prompt=True)
    assert [text for text, _, counted in pieces if counted] == [
        "Paris.<|im_end|>",
        "Rome.<|im_end|>",
    ]
    assert pieces[-1] == ("<|im_start|>assistant\n", "assistant", False)


def test_the_mask_equals_trl_sft_trainers_labels(tmp_path, tokenizer, tagged):
    """TRL's SFTTrainer given the tagged template (assistant_only_loss=True) counts the tokens
    the hand-built mask counts; on prompt-completion data its completion mask counts, beyond
    them, the newline after the completion's <|im_end|>."""
    from datasets import Dataset
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl import SFTConfig, SFTTrainer
    from trl.chat_template_utils import is_chat_template_stop_token_trained

    tagged_tokenizer = AutoTokenizer.from_pretrained(smollm2_dir())
    tagged_tokenizer.chat_template = tagged
    assert is_chat_template_stop_token_trained(tagged_tokenizer)  # TRL's own check
    tiny = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=8,
        )
    )
    conversations = [
        m for name, m in CONVERSATIONS.items() if any(x["role"] == "assistant" for x in m)
    ]
    config = dict(output_dir=str(tmp_path), use_cpu=True, report_to="none", max_length=None)
    trainer = SFTTrainer(
        model=tiny,
        args=SFTConfig(assistant_only_loss=True, **config),
        train_dataset=Dataset.from_list([{"messages": m} for m in conversations]),
        processing_class=tagged_tokenizer,
    )
    for messages, row in zip(conversations, trainer.train_dataset, strict=True):
        encoded = encode(tokenizer, messages)
        assert row["input_ids"] == encoded["input_ids"].tolist()
        labels = torch.tensor(row["labels"])
        assert torch.equal(labels != -100, encoded["assistant_mask"])

    pairs = [  # prompt-completion: the last assistant reply is the completion
        m[: max(i for i, x in enumerate(m) if x["role"] == "assistant") + 1] for m in conversations
    ]
    # not a completion that starts with whitespace: its first token merges with the header's
    # newline, and TRL, which starts the completion where the two tokenizations part, warns
    pairs = [m for m in pairs if m[-1]["content"][:1] not in (" ", "\n")]
    trainer = SFTTrainer(
        model=tiny,
        args=SFTConfig(**config),
        train_dataset=Dataset.from_list(
            [{"prompt": m[:-1], "completion": m[-1:]} for m in pairs if len(m) > 1]
        ),
        processing_class=AutoTokenizer.from_pretrained(smollm2_dir()),
    )
    newline = tokenizer.convert_tokens_to_ids("Ċ")
    for messages, row in zip([m for m in pairs if len(m) > 1], trainer.train_dataset, strict=True):
        encoded = encode(tokenizer, messages)
        ids, mask = encoded["input_ids"], encoded["assistant_mask"]
        assert row["input_ids"] == ids.tolist()
        last_reply = mask.clone()
        last_reply[
            : len(encode(tokenizer, messages[:-1], add_generation_prompt=True)["input_ids"])
        ] = False
        assert ids[-1] == newline and not last_reply[-1]
        last_reply[-1] = True  # the newline after <|im_end|>: TRL counts it, this page does not
        assert torch.equal(torch.tensor(row["labels"]) != -100, last_reply)


@torch.no_grad()
def test_generation_stops_at_im_end_and_equals_model_generate(tokenizer, model):
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    messages = [
        {"role": "system", "content": "Answer in a few words."},
        {"role": "user", "content": "What is the capital of Italy?"},
    ]
    prompt = encode(tokenizer, messages, add_generation_prompt=True)["input_ids"][None]
    ours = generate(model, prompt, max_new_tokens=16, eos_token_id=end)
    theirs = model.generate(
        prompt, max_new_tokens=16, do_sample=False, eos_token_id=end, pad_token_id=end
    )
    assert torch.equal(ours, theirs)
    assert ours[0, -1] == end and (ours[0, prompt.shape[1] : -1] != end).all()


@torch.no_grad()
def test_warning_a_missing_generation_prompt(tokenizer, model):
    header = tokenizer("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    for name in ["one question", "a system message, two exchanges"]:
        messages = CONVERSATIONS[name]
        messages = messages[: max(i for i, m in enumerate(messages) if m["role"] == "user") + 1]
        with_header = encode(tokenizer, messages, add_generation_prompt=True)["input_ids"]
        without = encode(tokenizer, messages)["input_ids"]
        assert with_header[: len(without)].tolist() == without.tolist()
        assert with_header[len(without) :].tolist() == header
        # SmolLM2 writes the header itself: it is in its reply, four tokens of max_new_tokens
        answer = generate(model, without[None], max_new_tokens=len(header))
        assert answer[0, len(without) :].tolist() == header


def test_warning_a_doubled_bos(tokenizer):
    adds_bos = AutoTokenizer.from_pretrained(smollm2_dir(), add_bos_token=True)
    bos = tokenizer.bos_token_id
    assert tokenizer.bos_token == "<|im_start|>" and not tokenizer.add_bos_token
    for messages in CONVERSATIONS.values():
        text = tokenizer.apply_chat_template(messages, tokenize=False)
        ids = tokenizer.apply_chat_template(messages)["input_ids"]
        assert ids[0] == bos and ids[1] != bos
        assert tokenizer(text)["input_ids"] == ids  # SmolLM2's tokenizer adds nothing
        assert adds_bos(text)["input_ids"] == [bos, *ids]  # one that adds its BOS doubles it
        assert adds_bos(text, add_special_tokens=False)["input_ids"] == ids
        assert adds_bos.apply_chat_template(messages)["input_ids"] == ids


def test_warning_a_template_applied_twice(tokenizer):
    system_prompt = default_system_prompt(tokenizer.chat_template)
    start = tokenizer.convert_tokens_to_ids("<|im_start|>")
    for name, messages in CONVERSATIONS.items():
        once = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        twice_messages = [{"role": "user", "content": once}]
        twice = tokenizer.apply_chat_template(
            twice_messages, tokenize=False, add_generation_prompt=True
        )
        assert twice == render(twice_messages, system_prompt, add_generation_prompt=True)
        assert twice.count(system_prompt) == once.count(system_prompt) + 1, name
        ids = tokenizer.apply_chat_template(twice_messages, add_generation_prompt=True)
        # the control tokens in the content are encoded as control tokens ...
        assert ids["input_ids"].count(start) == once.count("<|im_start|>") + 3, name
        sanitized = tokenizer.apply_chat_template(
            twice_messages, add_generation_prompt=True, sanitize_control_tokens=True
        )
        # ... unless sanitized, as text: the string is still rendered twice
        assert sanitized["input_ids"].count(start) == 3, name
