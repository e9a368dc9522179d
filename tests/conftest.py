"""The test session's set-up, and where everything the tests share lives.

Fixtures, which a test asks for by name:
  tests/plugins/models.py     no_grad, to turn autograd off; tokenizer (MiniLM's), minilm,
                              gpt2_shakespeare, gpt2_tokenizer, tempest_ids, gpt2_124m,
                              bert_shakespeare, shakespeare_documents, tiny_corpus
  tests/plugins/proofs.py     prove(component, reference, inputs, ours, theirs, atol),
                              which every parity test asserts with
  tests/plugins/site.py       built_site
  tests/plugins/browser.py    server, browser, tab; new_tab, loaded_live_page,
                              assert_readable, contrast, record_worst to import
Inputs and helpers, which a test imports:
  tests/inputs.py             ATOL, SENTENCE, PAIRS, BATCH, random_ids
  tests/training.py           run_training, documents_holding, without_timing
  tests/labs.py               LabRun
  tests/tokenizer_texts.py    random_texts, tempest_lines, EDGE_CASES
The run itself:
  tests/plugins/selection.py  --page, --configuration, --reader: what a run collects
  tests/plugins/groups.py     pytest-xdist's groups, the longest first
  tests/plugins/report.py     the summary: blocks run, narrow margins, pages over budget

Here: Hugging Face offline, on the cache the set-up filled (the one any Python on the
machine reads), no display, and the models and data sets in place before any test."""

import os

from snippets.hub import provision, use_offline_hub

# Before anything imports transformers or huggingface_hub: they read these once.
use_offline_hub()
os.environ["MPLBACKEND"] = "Agg"
# Before torch loads: waiting OpenMP threads sleep instead of spinning on other workers' cores
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# each after those it imports, so that pytest rewrites the asserts of all of them
pytest_plugins = [
    "tests.plugins.selection",
    "tests.plugins.report",
    "tests.plugins.groups",
    "tests.plugins.proofs",
    "tests.plugins.models",
    "tests.plugins.site",
    "tests.plugins.browser",
]


def pytest_sessionstart(session):
    provision()
