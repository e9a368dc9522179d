"""Fine-tuning MiniLM to classify movie-review sentences as positive or negative.

docs/training/fine-tuning.md includes the sections marked below and runs them; the
figure build runs the same `fine_tuning_run` (its result cached in .cache/ under a
hash of this file), and tests/test_training_fine_tuning.py checks the pieces on small inputs.
"""

from __future__ import annotations

# --8<-- [start:data]
import re
from pathlib import Path

import torch
import torch.nn.functional as F

NEUTRAL = 0.5  # sentences whose mean rating is within this of 0 have no clear side: dropped


def read_reviews(path):
    """(texts, labels) from the tab-separated file: id, mean rating from -4 to 4, sentence.

    A sentence is positive (1) if people rated it above +0.5 on average, negative (0)
    if below -0.5; the few in between are left out.
    """
    texts, labels = [], []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            _, rating, text = line.rstrip("\r\n").split("\t")
            if abs(float(rating)) > NEUTRAL:
                texts.append(text)
                labels.append(int(float(rating) > 0))
    return texts, labels


def split(texts, labels, train_size, held_out_size, seed=0):
    """A seeded shuffle, cut into a training set and a held-out set that share no sentence."""
    order = torch.randperm(len(texts), generator=torch.Generator().manual_seed(seed)).tolist()
    parts = order[:train_size], order[train_size : train_size + held_out_size]
    return [([texts[i] for i in part], torch.tensor([labels[i] for i in part])) for part in parts]


# --8<-- [end:data]


# --8<-- [start:bag_of_words]
def words(text):
    return re.findall(r"[a-z0-9']+", text.lower())


def bag_of_words(texts, vocabulary):
    """(N, V): 1.0 where a word of the vocabulary occurs in the text, 0.0 elsewhere."""
    index = {word: i for i, word in enumerate(vocabulary)}
    features = torch.zeros(len(texts), len(vocabulary))
    for row, text in enumerate(texts):
        for word in words(text):
            if word in index:
                features[row, index[word]] = 1.0
    return features


def logistic_regression(features, labels, steps=300, lr=0.05, l2=1e-3):
    """A linear layer from words to 2 classes, fitted on the whole set at every step."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(features.shape[1], 2)
    optimizer = torch.optim.Adam(layer.parameters(), lr=lr)
    for _ in range(steps):
        loss = F.cross_entropy(layer(features), labels) + l2 * layer.weight.square().sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return layer


# --8<-- [end:bag_of_words]


# --8<-- [start:frozen]
@torch.no_grad()
def sentence_features(encoder, tokenizer, texts, batch_size=100):
    """Two fixed vectors per text from an encoder left as it is, (N, C) each: the pooler
    output, which the classification head reads, and the mean of the token vectors over
    the attention mask, normalised: the sentence embedding MiniLM was trained to give."""
    encoder.eval()
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # less padding per batch
    pooled, means = [], []
    for start in range(0, len(texts), batch_size):
        inputs = tokenizer(
            [texts[i] for i in order[start : start + batch_size]], padding=True, return_tensors="pt"
        )
        out = encoder(**inputs)
        real = inputs["attention_mask"].unsqueeze(-1).float()  # (B, T, 1): 0 at padding
        mean = (out.last_hidden_state * real).sum(dim=1) / real.sum(dim=1)  # (B, C)
        pooled.append(out.pooler_output)
        means.append(F.normalize(mean, dim=-1))
    back = torch.tensor(order).argsort()  # from length order back to the order of texts
    return torch.cat(pooled)[back], torch.cat(means)[back]


# --8<-- [end:frozen]


# --8<-- [start:fine_tune]
@torch.no_grad()
def accuracy(model, tokenizer, texts, labels, batch_size=100):
    """The fraction of `texts` whose highest logit is their label."""
    model.eval()
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # less padding per batch
    correct = 0
    for start in range(0, len(texts), batch_size):
        rows = order[start : start + batch_size]
        inputs = tokenizer([texts[i] for i in rows], padding=True, return_tensors="pt")
        logits = model(**inputs).logits  # (B, 2)
        correct += (logits.argmax(dim=-1) == labels[rows]).sum().item()
    return correct / len(texts)


def fine_tune(
    model, tokenizer, train, held_out, epochs=1, batch_size=32, lr=2e-4, eval_every=16, seed=0
):
    """Train every weight with AdamW; return the loss of each step, and the held-out
    accuracy every `eval_every` steps as (step, accuracy) pairs.

    The rate warms up over the first tenth of the steps, then decays linearly to 0.
    Each epoch shuffles the sentences, then sorts each run of 8 batches by length, so
    that a batch holds sentences of similar lengths and pads them little.
    """
    texts, labels = train
    lengths = [len(text) for text in texts]  # in characters: close enough to tokens to sort by
    generator = torch.Generator().manual_seed(seed)
    steps = epochs * -(-len(texts) // batch_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, (steps - step) / (steps - warmup))
    )
    losses, curve = [], []
    for _ in range(epochs):
        order = torch.randperm(len(texts), generator=generator).tolist()
        run = 8 * batch_size
        order = [
            i
            for start in range(0, len(order), run)
            for i in sorted(order[start : start + run], key=lengths.__getitem__)
        ]
        for start in range(0, len(texts), batch_size):
            rows = order[start : start + batch_size]
            batch = [texts[i] for i in rows]
            inputs = tokenizer(batch, padding=True, return_tensors="pt")  # input_ids: (B, T)
            model.train()
            loss = model(**inputs, labels=labels[rows]).loss  # labels[rows]: (B,), long
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
            if len(losses) % eval_every == 0 or len(losses) == steps:
                curve.append((len(losses), accuracy(model, tokenizer, *held_out)))
    return losses, curve


# --8<-- [end:fine_tune]


RUN_NAME = "fine-tuning-run"  # its result is kept in .cache/ under this name


def fine_tuning_run(reviews_path, train_size=1000, held_out_size=400):
    """The page's whole experiment: both baselines, then MiniLM before and after training."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    train, held_out = split(*read_reviews(reviews_path), train_size, held_out_size)
    majority_class = int(train[1].float().mean().item() > 0.5)
    counts = {}
    for text in train[0]:
        for word in set(words(text)):
            counts[word] = counts.get(word, 0) + 1
    vocabulary = sorted(word for word, count in counts.items() if count >= 2)
    layer = logistic_regression(bag_of_words(train[0], vocabulary), train[1])
    with torch.no_grad():
        predicted = layer(bag_of_words(held_out[0], vocabulary)).argmax(dim=-1)
    torch.manual_seed(0)  # the classification head is drawn at random
    model = AutoModelForSequenceClassification.from_pretrained(
        "sentence-transformers/all-MiniLM-L6-v2", num_labels=2
    )
    tokenizer = AutoTokenizer.from_pretrained("sentence-transformers/all-MiniLM-L6-v2")
    untrained = accuracy(model, tokenizer, *held_out)
    losses, curve = fine_tune(model, tokenizer, train, held_out)
    return {
        "majority": (held_out[1] == majority_class).float().mean().item(),
        "bag_of_words": (predicted == held_out[1]).float().mean().item(),
        "losses": losses,
        "curve": [(0, untrained), *curve],
    }


def cached_fine_tuning_run(reviews_path):
    """`fine_tuning_run`, computed once per version of this file and of torch."""
    from snippets.book import computed_once  # not in the sections above: readers have no snippets/

    sources = [Path(__file__).read_bytes()]
    return computed_once(RUN_NAME, sources, lambda: fine_tuning_run(reviews_path))
