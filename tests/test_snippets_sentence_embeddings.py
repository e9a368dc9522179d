"""snippets/sentence_embeddings.py against sentence-transformers, on MiniLM's real weights
and on inputs docs/bert/sentence-embeddings.md does not show: padded batches of uneven
lengths, batches split differently, a text past the 256-token limit, sentence order, and
a pooling that keeps several vectors of each text from one pass."""

import pytest
import torch
from sentence_transformers import SentenceTransformer

from snippets import sentence_embeddings as se
from snippets.hub import MINILM

pytestmark = pytest.mark.usefixtures("no_grad")

UNEVEN = [
    "Hi.",
    "The quick brown fox jumps over the lazy dog while the farmer looks on.",
    "Où est la gare ? Je ne la trouve pas.",
    "Tokens, tokens: 12,345 of them!",
    "A",
    " ".join(["a sentence far longer than the model's limit of 256 tokens"] * 40),
    "Naïve café owners prefer déjà-vu.",
]


@pytest.fixture(scope="module")
def library():
    return SentenceTransformer(MINILM.repo_id, device="cpu")


def test_embed_equals_sentence_transformers_on_uneven_padded_batches(
    prove, minilm, tokenizer, library
):
    theirs = library.encode(UNEVEN, convert_to_tensor=True)  # (N, C)
    ours = []
    for batch_size in (1, 3, 32):
        ours.append(se.embed(minilm, tokenizer, UNEVEN, batch_size=batch_size))
        assert ours[-1].shape == theirs.shape == (len(UNEVEN), 384)
    prove(
        "sentence embeddings by hand",
        "`SentenceTransformer.encode`",
        "7 texts of uneven lengths, one past 256 tokens, in batches of 1, 3 and 32, MiniLM",
        torch.stack(ours),
        theirs.expand(3, -1, -1),
        1e-5,
    )


def test_embed_cuts_at_the_configured_length(prove, minilm, tokenizer, library):
    """The long text is cut at 256 tokens, as sentence_bert_config.json says and as
    sentence-transformers does: its embedding equals that of its first 254 word pieces."""
    assert library.max_seq_length == se.MAX_TOKENS
    long = UNEVEN[-2]
    kept = tokenizer(long, add_special_tokens=False)["input_ids"][: se.MAX_TOKENS - 2]
    cut = tokenizer.decode(kept)
    assert len(tokenizer(long)["input_ids"]) > se.MAX_TOKENS
    ours = se.embed(minilm, tokenizer, [long, cut])
    prove(
        "sentence embedding by hand of a text past 256 tokens",
        "the same, of its first 254 word pieces",
        "a text of 440 words, MiniLM",
        ours[0],
        ours[1],
        1e-5,
    )


def test_rows_are_unit_vectors_and_do_not_depend_on_their_batch(prove, minilm, tokenizer):
    together = se.embed(minilm, tokenizer, UNEVEN)
    assert torch.allclose(together.norm(dim=-1), torch.ones(len(UNEVEN)), atol=1e-6)
    alone = torch.cat([se.embed(minilm, tokenizer, [text]) for text in UNEVEN])
    prove(
        "sentence embeddings by hand, in one padded batch",
        "the same, each text alone",
        "7 texts of uneven lengths, one past 256 tokens, MiniLM",
        together,
        alone,
        1e-5,
    )


def test_a_pool_of_several_vectors_gives_each_as_its_own_pass(prove, minilm, tokenizer):
    """docs/bert/sentence-embeddings.md embeds the play once, keeping the mean, the pooler
    output and the [CLS] vector of each line: each slot equals what a pass of its own gives,
    `embed` with its default pooling for the mean, the model's pooler_output for the pooler
    output (`model.pooler` on the last hidden state), each text alone."""

    def three_ways(last_hidden_state, attention_mask):  # (B, T, C) -> (B, 3, C), as on the page
        return torch.stack(
            [
                se.mean_pool(last_hidden_state, attention_mask),
                minilm.pooler(last_hidden_state),
                last_hidden_state[:, 0],
            ],
            dim=1,
        )

    kept = []
    for batch_size in (1, 3, 32):
        several = se.embed(minilm, tokenizer, UNEVEN, batch_size=batch_size, pool=three_ways)
        assert several.shape == (len(UNEVEN), 3, 384)
        mean = se.embed(minilm, tokenizer, UNEVEN, batch_size=batch_size)
        assert torch.equal(several[:, 0], mean)  # the same pass, the same arithmetic
        kept.append(several[:, 1:])  # (N, 2, C): the pooler output, the [CLS] vector
    alone = []
    for text in UNEVEN:
        inputs = tokenizer(text, truncation=True, max_length=se.MAX_TOKENS, return_tensors="pt")
        outputs = minilm(**inputs)
        alone.append(torch.stack([outputs.pooler_output[0], outputs.last_hidden_state[0, 0]]))
    prove(
        "pooler output and [CLS] vector, kept by `embed` from the pass of the mean",
        "`BertModel`'s pooler_output and last_hidden_state[:, 0], each text alone",
        "7 texts of uneven lengths, one past 256 tokens, in batches of 1, 3 and 32, MiniLM",
        torch.stack(kept),
        torch.nn.functional.normalize(torch.stack(alone), dim=-1).expand(3, -1, -1, -1),
        1e-5,  # float32, padded batches against one text: measured 1.9e-7
    )


def test_mean_pool_leaves_out_padding(prove):
    torch.manual_seed(0)
    last_hidden_state = torch.randn(2, 4, 3)
    attention_mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    pooled = se.mean_pool(last_hidden_state, attention_mask)
    prove(
        "mean pooling by hand, padding masked out",
        "`torch.mean` over the real tokens",
        "random vectors, 2×4, one row half padding",
        pooled,
        torch.stack([last_hidden_state[0, :2].mean(dim=0), last_hidden_state[1].mean(dim=0)]),
        1e-8,
    )


def test_search_and_ranks_agree_with_sorting():
    torch.manual_seed(1)
    corpus = torch.nn.functional.normalize(torch.randn(50, 8), dim=-1)
    queries = torch.nn.functional.normalize(torch.randn(5, 8), dim=-1)
    scores, indices = se.search(queries, corpus, top_k=4)
    order = (queries @ corpus.T).argsort(dim=-1, descending=True)  # (Q, N)
    assert torch.equal(indices, order[:, :4])
    assert torch.allclose(scores, (queries @ corpus.T).gather(1, indices))
    answers = torch.tensor([3, 10, 0, 49, 7])
    expected = [order[q].tolist().index(a) + 1 for q, a in enumerate(answers.tolist())]
    assert se.ranks(queries, corpus, answers).tolist() == expected
