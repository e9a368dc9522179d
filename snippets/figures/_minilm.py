"""MiniLM and the sentences Part I's figures run through it, for several chapters' figures."""

from functools import cache

import torch

from snippets.figures._flow import record_calls
from snippets.hub import MINILM

# the padded batch of sentence pairs the tokenizer chapter draws: B = 3, T = 13
QUESTIONS = ["Where is the cat?", "Who wrote Hamlet?", "Why?"]
ANSWERS = ["On the mat.", "Shakespeare wrote it around 1600.", "Because."]
# the sentence whose attention the self-attention chapter looks at
ATTENTION_SENTENCE = "The animal didn't cross the street because it was too tired."


@cache
def minilm():
    from transformers import AutoModel

    return AutoModel.from_pretrained(MINILM.repo_id, attn_implementation="eager")


@cache
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(MINILM.repo_id)


def shape_namer(model, batch):
    """The sizes behind a batch's shapes, and a function that labels a shape with them."""
    config = model.config
    B, T = batch["input_ids"].shape
    H = config.num_attention_heads
    sizes = {
        "B": B,
        "T": T,
        "C": config.hidden_size,
        "H": H,
        "D": config.hidden_size // H,
        "I": config.intermediate_size,
    }
    # a size that meant two things would make a label ambiguous
    assert len(set(sizes.values())) == len(sizes) and 1 not in sizes.values(), sizes
    letters = {size: letter for letter, size in sizes.items()}

    def label(shape):
        return "(" + ", ".join(letters.get(n, str(n)) for n in shape) + f")\n{tuple(shape)}"

    return sizes, label


def pairs_batch():
    return tokenizer()(QUESTIONS, ANSWERS, padding=True, return_tensors="pt")


@cache
def recorded_minilm():
    """What the hooks saw on MiniLM for the tokenizer chapter's batch; the sizes; the labeller."""
    model, batch = minilm(), pairs_batch()
    return record_calls(model, batch), *shape_namer(model, batch)


@cache
def attention_sentence_outputs():
    batch = tokenizer()(ATTENTION_SENTENCE, return_tensors="pt")
    with torch.no_grad():
        return batch.tokens(), minilm()(**batch, output_attentions=True, output_hidden_states=True)
