"""The chat format

The code docs/assistant/chat-format.md includes, which its tests import: SmolLM2's chat
template (ChatML) rendered by hand, the conversation's ids and the mask of the tokens an
SFT loss counts, and a copy of the template with `{% generation %}` tags, for the library's
own mask. Shapes: T tokens.
"""

import torch

# --8<-- [start:conversation]
conversation = [  # a conversation to train on: two questions, each answered
    {"role": "user", "content": "What is the capital of France? Answer in one word."},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "And of Italy?"},
    {"role": "assistant", "content": "Rome."},
]
# --8<-- [end:conversation]


# --8<-- [start:render]
def default_system_prompt(template):
    """The system prompt SmolLM2's template writes when a conversation has none."""
    return template.split("<|im_start|>system\n")[1].split("<|im_end|>")[0]


def chatml_pieces(messages, system_prompt, add_generation_prompt=False):
    """The conversation in ChatML as (text, role, counted) pieces: each message is a header
    `<|im_start|>role\\n`, its content with `<|im_end|>`, and a newline. `counted` is True
    for an assistant's content and its `<|im_end|>`: what the model writes in that turn."""
    pieces = []
    for i, message in enumerate(messages):
        if i == 0 and message["role"] != "system":  # the template's default, first
            pieces += [
                ("<|im_start|>system\n", "system", False),
                (system_prompt + "<|im_end|>", "system", False),
                ("\n", "system", False),
            ]
        role = message["role"]
        pieces += [
            (f"<|im_start|>{role}\n", role, False),
            (message["content"] + "<|im_end|>", role, role == "assistant"),
            ("\n", role, False),
        ]
    if add_generation_prompt:  # the header of the turn the model is to write
        pieces.append(("<|im_start|>assistant\n", "assistant", False))
    return pieces


def render(messages, system_prompt, add_generation_prompt=False):
    """The conversation as one string, as the chat template writes it."""
    return "".join(
        text for text, _, _ in chatml_pieces(messages, system_prompt, add_generation_prompt)
    )


# --8<-- [end:render]


# --8<-- [start:encode]
def encode(tokenizer, messages, add_generation_prompt=False):
    """The rendered conversation's ids (T,), each token's role, and the assistant mask (T,):
    True on the tokens an SFT loss counts, those that overlap a counted piece."""
    system_prompt = default_system_prompt(tokenizer.chat_template)
    pieces = chatml_pieces(messages, system_prompt, add_generation_prompt)
    text = "".join(piece for piece, _, _ in pieces)
    # nothing added on encode: the template wrote every special token already
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    role_of, counted = [], []  # one entry per character of `text`
    for piece, role, counts in pieces:
        role_of += [role] * len(piece)
        counted += [counts] * len(piece)
    spans = encoded["offset_mapping"]  # each token's (start, end) characters in `text`
    return {
        "input_ids": torch.tensor(encoded["input_ids"]),  # (T,)
        "roles": [role_of[start] for start, _ in spans],  # T names
        "assistant_mask": torch.tensor([any(counted[s:e]) for s, e in spans]),  # (T,) bool
    }


# --8<-- [end:encode]


# --8<-- [start:tagged]
# SmolLM2's template writes every message with this one expression ...
MESSAGE = "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
# ... which, in the copy, marks an assistant's content and its <|im_end|> as generated
TAGGED_MESSAGE = (
    "{{'<|im_start|>' + message['role'] + '\n'}}"
    "{% if message['role'] == 'assistant' %}"
    "{% generation %}{{message['content'] + '<|im_end|>'}}{% endgeneration %}"
    "{% else %}{{message['content'] + '<|im_end|>'}}{% endif %}"
    "{{'\n'}}"
)


def with_generation_tags(template):
    """A copy of the template whose assistant replies are inside {% generation %} tags."""
    assert template.count(MESSAGE) == 1, "not SmolLM2's template"
    return template.replace(MESSAGE, TAGGED_MESSAGE)


# --8<-- [end:tagged]
