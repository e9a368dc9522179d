"""docs/bert/sentence-embeddings.md on MiniLM's real weights, on inputs the page does not
show: its warning box (a plain mean over a padded batch depends on the batch). `embed`
itself is proven equal to sentence-transformers in tests/test_snippets_sentence_embeddings.py."""

import pytest
import torch
import torch.nn.functional as F

from snippets import sentence_embeddings as se
from tests.inputs import BATCH

pytestmark = pytest.mark.usefixtures("no_grad")


def test_warning_a_plain_mean_over_pad_depends_on_the_batch(prove, minilm, tokenizer):
    """docs/bert/sentence-embeddings.md, warning "A plain mean over `[PAD]` depends on the
    batch": in a padded batch, the masked mean of each row equals that
    sentence's mean alone; the plain mean over every position does not, for padded rows."""
    batch = tokenizer(BATCH, padding=True, return_tensors="pt")
    last_hidden_state = minilm(**batch).last_hidden_state  # (B, T, C)
    masked = se.mean_pool(last_hidden_state, batch["attention_mask"])  # (B, C)
    plain = last_hidden_state.mean(dim=1)  # (B, C)
    padded = (batch["attention_mask"] == 0).any(dim=1)  # (B,)
    assert padded.any() and not padded.all()
    alones = []
    for row, text in enumerate(BATCH):
        alone = minilm(**tokenizer(text, return_tensors="pt")).last_hidden_state.mean(dim=1)[0]
        alones.append(alone)
        cosine = F.cosine_similarity(plain[row], alone, dim=0)
        if padded[row]:
            assert cosine < 0.99, text
    alones = torch.stack(alones)  # (B, C)
    prove(
        "mean pooling by hand, padding masked out, over a padded batch",
        "`BertModel` on each sentence alone, mean over its tokens",
        "padded batch of 4, MiniLM",
        masked,
        alones,
        2e-5,  # float32, a padded batch against one sentence: measured 1.3e-6
    )
    prove(
        "plain mean over every position of a padded batch, rows without padding",
        "`BertModel` on each sentence alone, mean over its tokens",
        "padded batch of 4, MiniLM, the rows without padding",
        plain[~padded],
        alones[~padded],
        1e-5,
    )
