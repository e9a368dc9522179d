"""Supervised fine-tuning: the loss on the assistant's tokens

The code docs/assistant/sft.md includes, which its tests import: a batch of
prompt-completion examples with its labels (`sft_batch`), the mean cross-entropy over the
completion's tokens (`sft_loss`), the loop that trains the book's GPT-2 on Part V's
speaker task with them (`fine_tune`; snippets/speaker_task.py ships its model, and the DPO
and GRPO chapters import all three), and packing: several examples in one row, each
attending only to itself (`pack`, `block_causal_mask`, `document_losses`).
"""

# --8<-- [start:sft_batch]
import torch
import torch.nn.functional as F

IGNORE = -100  # the label of a position the loss skips, as F.cross_entropy's ignore_index


def sft_batch(tokenizer, examples: list[dict]) -> dict:
    """Prompt-completion dicts -> input_ids, attention_mask and labels, each (B, T): the
    completion ends with the end-of-text token, right padding, labels IGNORE outside the
    completion."""
    rows, labels = [], []
    for example in examples:
        prompt = tokenizer(example["prompt"])["input_ids"]
        completion = tokenizer(example["completion"])["input_ids"] + [tokenizer.eos_token_id]
        rows.append(prompt + completion)
        labels.append([IGNORE] * len(prompt) + completion)
    T = max(map(len, rows))
    pad = tokenizer.eos_token_id  # any id: the attention mask and the labels skip padding
    return {
        "input_ids": torch.tensor([r + [pad] * (T - len(r)) for r in rows]),
        "attention_mask": torch.tensor([[1] * len(r) + [0] * (T - len(r)) for r in rows]),
        "labels": torch.tensor([y + [IGNORE] * (T - len(y)) for y in labels]),
    }


# --8<-- [end:sft_batch]


# --8<-- [start:sft_loss]
def sft_loss(logits, labels):
    """logits (B, T, V), labels (B, T) -> the mean cross-entropy over the tokens that count:
    position t predicts token t + 1, and every label IGNORE is left out of sum and count."""
    predicted = logits[:, :-1].flatten(0, 1)  # (B (T - 1), V)
    targets = labels[:, 1:].flatten()  # (B (T - 1),)
    return F.cross_entropy(predicted, targets, ignore_index=IGNORE)


# --8<-- [end:sft_loss]


# --8<-- [start:fine_tune]
def fine_tune(model, tokenizer, examples, epochs=2, batch_size=16, lr=3e-4, seed=0):
    """Full fine-tuning with AdamW on `examples`, in order, `epochs` times; the losses."""
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in range(epochs):
        for start in range(0, len(examples), batch_size):
            batch = sft_batch(tokenizer, examples[start : start + batch_size])
            logits = model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
            ).logits
            loss = sft_loss(logits, batch["labels"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    model.eval()
    return losses


# --8<-- [end:fine_tune]


# --8<-- [start:pack]
def pack(batch: dict) -> dict:
    """A padded batch (B, T) -> its examples end to end in one row (1, N), N the number of
    real tokens: input_ids; labels, IGNORE on each example's first token (no token of the
    previous example predicts it); position_ids that restart at 0 with each example; and
    document, the index of the example each token comes from."""
    lengths = batch["attention_mask"].sum(1).tolist()  # each example's real tokens
    position_ids = torch.cat([torch.arange(n) for n in lengths])[None]  # (1, N)
    labels = torch.cat([batch["labels"][b, :n] for b, n in enumerate(lengths)])[None]
    return {
        "input_ids": torch.cat([batch["input_ids"][b, :n] for b, n in enumerate(lengths)])[None],
        "labels": labels.masked_fill(position_ids == 0, IGNORE),  # (1, N)
        "position_ids": position_ids,
        "document": torch.cat([torch.full((n,), b) for b, n in enumerate(lengths)])[None],
    }


def block_causal_mask(document):
    """document (1, N) -> (1, 1, N, N) bool, True where query i may attend to key j:
    j <= i, and both in the same document."""
    N = document.shape[-1]
    causal = torch.ones(N, N, dtype=torch.bool).tril()  # (N, N)
    same = document[0, :, None] == document[0, None, :]  # (N, N)
    return (causal & same)[None, None]  # (1, 1, N, N): one mask for every head


def document_losses(logits, labels, document):
    """logits (1, N, V), labels and document (1, N) -> (D,): each document's own mean
    cross-entropy over its tokens that count, D the number of documents."""
    per_token = F.cross_entropy(
        logits[0, :-1], labels[0, 1:], ignore_index=IGNORE, reduction="none"
    )  # (N - 1,), 0 where the label is IGNORE
    counted = labels[0, 1:] != IGNORE  # (N - 1,)
    which = document[0, 1:]  # the document of each predicted token
    D = int(document.max()) + 1
    total = torch.zeros(D).index_add(0, which, per_token)
    return total / torch.zeros(D).index_add(0, which, counted.float())


# --8<-- [end:pack]
