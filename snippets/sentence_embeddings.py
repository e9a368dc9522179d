"""Sentence embeddings as all-MiniLM-L6-v2 makes them: the mean of the real tokens'
last hidden states, L2-normalised, and a semantic search on top.

docs/bert/sentence-embeddings.md includes the sections marked below;
tests/test_snippets_sentence_embeddings.py proves `embed` equal to sentence-transformers'
`SentenceTransformer.encode`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# --8<-- [start:embed]
MAX_TOKENS = 256  # sentence_bert_config.json's max_seq_length: longer inputs are cut


def mean_pool(last_hidden_state, attention_mask):
    """Each sequence's mean token vector, padding left out: (B, T, C) to (B, C)."""
    real = attention_mask.unsqueeze(-1).to(last_hidden_state.dtype)  # (B, T, 1): 0 at padding
    return (last_hidden_state * real).sum(dim=1) / real.sum(dim=1).clamp(min=1e-9)  # (B, C)


@torch.no_grad()
def embed(model, tokenizer, sentences, batch_size=32, pool=mean_pool):
    """Sentence embeddings, (N, C) with unit rows: each sentence cut at MAX_TOKENS tokens,
    its real tokens' last hidden states averaged, the mean scaled to length 1.

    The sentences are batched longest first, by characters, as SentenceTransformer.encode
    batches them, so that little padding is computed; the rows come back in the order
    given. Another `pool(last_hidden_state, attention_mask)` gives other vectors, or K
    of them from one pass if it returns (B, K, C): then (N, K, C), each of length 1."""
    model.eval()  # no dropout: the same sentence always gives the same vector
    # longest first: similar lengths share a batch
    order = sorted(range(len(sentences)), key=lambda i: -len(sentences[i]))
    rows = []
    for start in range(0, len(sentences), batch_size):
        batch = [sentences[i] for i in order[start : start + batch_size]]
        inputs = tokenizer(
            batch, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt"
        ).to(model.device)
        last_hidden_state = model(**inputs).last_hidden_state  # (B, T, C)
        rows.append(pool(last_hidden_state, inputs["attention_mask"]))  # (B, C), or (B, K, C)
    back = torch.tensor(order).argsort()  # (N,): back to the order given
    return F.normalize(torch.cat(rows)[back], dim=-1)  # (N, C), or (N, K, C)


# --8<-- [end:embed]


# --8<-- [start:search]
def search(queries, corpus, top_k=3):
    """For each query row, the `top_k` most similar corpus rows: (scores, indices), each
    (Q, top_k). With unit rows, a dot product is the cosine similarity."""
    similarity = queries @ corpus.T  # (Q, N)
    return similarity.topk(top_k, dim=-1)


def ranks(queries, corpus, answers):
    """Where each query's right answer lands when the corpus is sorted by similarity to
    it: 1 is first. (Q,) from queries (Q, C), corpus (N, C) and answer indices (Q,)."""
    similarity = queries @ corpus.T  # (Q, N)
    right = similarity.gather(1, answers[:, None])  # (Q, 1)
    return (similarity > right).sum(dim=1) + 1  # (Q,)


# --8<-- [end:search]
