"""The inputs the parity tests share: Part I's sentences, which no page shows, its float32
tolerance, and random token ids. tools/proofs.py reads this module's constants for the
proof table."""

# Part I's float32 tolerance for what stays small (probabilities, embeddings, single
# layers); hidden states through whole models have their own, measured (see the docstring
# of tests/test_snippets_bert_by_hand.py)
ATOL = 1e-5
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


def random_ids(model, batch, length, seed):
    """(batch, length) token ids drawn uniformly from the model's vocabulary."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    return torch.randint(model.config.vocab_size, (batch, length), generator=generator)
