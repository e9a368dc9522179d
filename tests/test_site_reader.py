"""The built site, run as its readers run it (`make test-reader`; CI runs it after `make test`).

- Paste: each page's python blocks, taken from its built HTML, run in order in a fresh
  interpreter of the book's environment, in an empty folder outside the repository, with
  no HF_* variable set: the set-up has filled the cache that any Python reads. Each block
  must print what the page shows under it.
- Notebook: each notebook downloaded from the built site runs top to bottom in a fresh
  virtual environment outside the repository, holding torch (the local wheel), the
  kernel that runs it, and only what the notebook's set-up cell installs. Each cell must
  print what the page shows. Notebooks whose set-up cells install the same pins share one
  environment: it holds what any of them would hold alone.
- Sequence: Part I, then the training part, then Part III, pasted one after the other
  into one interpreter, as a reader who keeps a session open: no chapter may leave the
  session unusable for the next.

A failure names the page, the block and the first line that differs.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from snippets.book import nav
from tools.pages import (
    DOCS,
    lab_notebook_path,
    mkdocs_config,
    notebook_path,
    pages,
    parse,
    site_path,
)

# The paste runs spend most of their time asleep: with no network and no HF_HUB_OFFLINE,
# huggingface_hub retries each Hub lookup for about 23 s before it reads the cache.
# Running several at once overlaps the waits; each holds 0.3 to 1.5 GB.
PASTES_AT_ONCE = 12
PAGE_TIMEOUT = 1800  # seconds: the slowest page, training included, with every retry

# Runs the blocks given as JSON in a fresh module named __main__, as pasted into Python,
# and writes what each printed, or the traceback of the first that raised.
PASTE = """
import contextlib, io, json, sys, traceback, types

def paste(blocks_file, results_file):
    blocks, results = json.load(open(blocks_file)), []
    session = types.ModuleType("__main__")
    sys.modules["__main__"] = session
    for number, code in enumerate(blocks):
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                exec(compile(code, f"<block {number + 1}>", "exec"), session.__dict__)
        except BaseException:
            results.append({"printed": printed.getvalue(), "error": traceback.format_exc()})
            break
        results.append({"printed": printed.getvalue(), "error": None})
    json.dump(results, open(results_file, "w"))

paste(sys.argv[1], sys.argv[2])
"""


class CodeBlocks(HTMLParser):
    """The python blocks of a built page, in order, each with the output the page shows
    under it (None if none); blocks marked as skipped are left out, as the tests skip them.

    A chapter's blocks are Material's highlighted `pre`s, an output the `pre` after an
    expected-output marker. A lab's are mkdocs-jupyter's cells: the code in a
    `highlight-ipynb hl-python` block, what it printed in a text output area."""

    def __init__(self):
        super().__init__()
        self.blocks: list[dict] = []
        self.language = None  # of the block being read
        self.text: list[str] | None = None
        self.last: dict | None = None  # the last python block, None if it was skipped
        self.skip_next = self.output_next = False

    def handle_comment(self, data):
        if "pytest-codeblocks:expected-output" in data:
            self.output_next = True
        elif data.strip().startswith("pytest.mark.skip"):
            self.skip_next = True

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag == "div" and "highlight" in classes:
            self.language = next((c[9:] for c in classes if c.startswith("language-")), "")
        elif tag == "div" and "highlight-ipynb" in classes:
            self.language = next((c[3:] for c in classes if c.startswith("hl-")), "")
        elif tag == "div" and "jp-OutputArea-output" in classes:
            printed = attrs.get("data-mime-type") == "text/plain"
            if printed and "jp-OutputArea-executeResult" not in classes:
                self.language, self.output_next = "", True
        elif tag == "pre" and self.language is not None:
            self.text = []

    def handle_data(self, data):
        if self.text is not None:
            self.text.append(data)

    def handle_endtag(self, tag):
        if tag != "pre" or self.text is None:
            return
        text, language = "".join(self.text), self.language
        self.text = self.language = None
        if language == "python":
            self.last = None if self.skip_next else {"code": text, "expected": None}
            self.blocks += [self.last] if self.last else []
        elif self.output_next and self.last:  # the output of the python block before it
            self.last["expected"] = (self.last["expected"] or "") + text
        self.skip_next = self.output_next = False  # each marker is for the block after it


def shown_blocks(site: Path, page: Path) -> list[dict]:
    """The python blocks of `page` in the built site, each with its output and where it is."""
    parser = CodeBlocks()
    parser.feed((site / site_path(page) / "index.html").read_text(encoding="utf-8"))
    for number, block in enumerate(parser.blocks, start=1):
        block["where"] = f"{site_path(page)}, python block {number}"
    return parser.blocks


def normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def first_difference(where: str, code: str, shown: str, printed: str) -> str:
    """`where`, the block's first line, and the first lines that differ."""
    first_line = code.strip().splitlines()[0] if code.strip() else ""
    diff = difflib.unified_diff(
        normalise(shown).splitlines(), normalise(printed).splitlines(),
        "shown on the page", "printed", lineterm="", n=1,
    )  # fmt: skip
    return f"{where} ({first_line!r}): the output differs\n" + "\n".join(list(diff)[:12])


def failures(blocks: list[dict], results: list[dict]) -> list[str]:
    problems = []
    for block, result in zip(blocks, results, strict=False):
        if result["error"]:
            first_line = block["code"].strip().splitlines()[0]
            return [*problems, f"{block['where']} ({first_line!r}) raised:\n{result['error']}"]
        printed, shown = normalise(result["printed"]), normalise(block["expected"] or "")
        if printed != shown:
            problems.append(first_difference(block["where"], block["code"], shown, printed))
    if len(results) < len(blocks):
        problems.append(f"only {len(results)} of {len(blocks)} blocks ran")
    return problems


def reader_environment(**extra: str) -> dict[str, str]:
    """This process's environment without what the test harness adds for itself: no HF_*
    variable (the harness runs offline) but those that say where the machine's cache is,
    HF_HOME and HF_HUB_CACHE, when whoever started the tests set them; no MPLBACKEND."""
    harness = ("HF_", "TRANSFORMERS_", "MPLBACKEND", "PYTEST_")
    where_the_cache_is = {"HF_HOME", "HF_HUB_CACHE"}
    return {
        k: v for k, v in os.environ.items() if k in where_the_cache_is or not k.startswith(harness)
    } | extra


def paste(blocks: list[dict], folder: Path, environment: dict[str, str]) -> list[dict]:
    folder.mkdir(parents=True)
    (folder / "blocks.json").write_text(json.dumps([b["code"] for b in blocks]))
    work = folder / "work"
    work.mkdir()
    subprocess.run(
        [sys.executable, "-c", PASTE, str(folder / "blocks.json"), str(folder / "results.json")],
        cwd=work, env=environment, capture_output=True, timeout=PAGE_TIMEOUT, check=False,
    )  # fmt: skip
    results = folder / "results.json"
    return json.loads(results.read_text()) if results.exists() else []


def site_pages() -> list[Path]:
    """Every page of the site with python blocks, chapters and labs, in nav order."""
    in_nav = [DOCS / page for _, section in nav() for _, page in section]
    chapters = {p for p in pages() if parse(p).cells}
    labs = {p.with_suffix(".py") for p in in_nav if p.parent.name == "labs"}
    return [p.with_suffix(".py") if p.with_suffix(".py") in labs else p for p in in_nav
            if p in chapters or p.with_suffix(".py") in labs]  # fmt: skip


# ---------------------------------------------------------------- paste


@pytest.fixture(scope="session")
def pasted(built_site, tmp_path_factory):
    """Every page pasted into its own fresh interpreter, several at a time: page -> results."""
    root = tmp_path_factory.mktemp("pasted")
    environment = reader_environment()
    with ThreadPoolExecutor(PASTES_AT_ONCE) as pool:
        runs = {
            page: pool.submit(
                paste,
                shown_blocks(built_site, page),
                root / site_path(page).strip("/"),
                environment,
            )
            for page in site_pages()
        }
        return {page: run.result() for page, run in runs.items()}


@pytest.mark.parametrize("page", site_pages(), ids=lambda p: p.relative_to(DOCS).as_posix())
def test_a_page_pasted_into_python_prints_what_it_shows(built_site, pasted, page):
    blocks = shown_blocks(built_site, page)
    assert blocks, f"{site_path(page)}: no python block in the built page"
    problems = failures(blocks, pasted[page])
    assert not problems, "\n\n".join(problems)


def test_the_built_pages_show_the_code_the_tests_run(built_site):
    """What a reader copies from a chapter is, line for line, what tests/test_docs.py runs from
    its source, includes expanded, and the outputs shown are those it compares. Blank lines
    are left out of the comparison: the site's Markdown puts two more between two included
    sections."""

    def lines(code):
        return [line.rstrip() for line in code.splitlines() if line.strip()]

    for page in site_pages():
        if page.suffix == ".md":
            shown = [(lines(b["code"]), b["expected"]) for b in shown_blocks(built_site, page)]
            ran = [(lines(b.code), b.expected_output) for b in parse(page).cells]
            assert [(code, normalise(out or "")) for code, out in shown] == [
                (code, normalise(out or "")) for code, out in ran
            ], site_path(page)


# ---------------------------------------------------------------- sequence


def test_chapters_pasted_one_after_another_into_one_session(built_site, tmp_path):
    """Part I, the training part and Part III in one interpreter, in nav order. Offline
    (HF_HUB_OFFLINE=1): what is tested here is the session the chapters leave behind."""
    parts = {"bert", "training", "gpt2"}
    chapters = [p for p in site_pages() if p.suffix == ".md" and p.parent.name in parts]
    blocks = [block for page in chapters for block in shown_blocks(built_site, page)]
    results = paste(blocks, tmp_path / "session", reader_environment(HF_HUB_OFFLINE="1"))
    problems = failures(blocks, results)
    assert not problems, "\n\n".join(problems)


# ---------------------------------------------------------------- notebooks


def downloaded_notebooks(site: Path) -> dict[str, Path]:
    """Every notebook the built site offers for download: name -> file."""
    found = {}
    for page in site_pages():
        relative = lab_notebook_path(page.stem) if page.suffix == ".py" else notebook_path(page)
        found[relative] = site / relative
    return found


def set_up_cell(notebook) -> str:
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    return code[0].source


@pytest.fixture(scope="session")
def base_environment(tmp_path_factory) -> Path:
    """A virtual environment outside the repository with torch (the local CPU wheel) and the
    kernel that runs the notebooks, as Colab has both; its packages, not its interpreter,
    are shared by the notebooks' environments."""
    from importlib.metadata import version

    base = tmp_path_factory.mktemp("reader-base")
    subprocess.run([sys._base_executable, "-m", "venv", str(base)], check=True)
    subprocess.run(
        [base / "bin" / "python", "-m", "pip", "install", "--quiet",
         f"torch=={version('torch')}", f"ipykernel=={version('ipykernel')}"],
        check=True, env=reader_environment(),
    )  # fmt: skip
    return base


def fresh_environment(base: Path, folder: Path) -> Path:
    """A new virtual environment that sees the base's packages, and nothing else."""
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    (site_packages,) = folder.glob("lib/python*/site-packages")
    (base_packages,) = base.glob("lib/python*/site-packages")
    (site_packages / "reader-base.pth").write_text(f"{base_packages}\n")
    kernel = folder / "kernels" / "reader"
    kernel.mkdir(parents=True)
    argv = [str(folder / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (kernel / "kernel.json").write_text(json.dumps({"argv": argv, "language": "python",
                                                    "display_name": "reader"}))  # fmt: skip
    return folder


def run_notebook(path: Path, environment: Path, work: Path) -> list[str]:
    """Run a downloaded notebook in `environment`'s kernel; the problems found."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    notebook = nbformat.read(path, as_version=4)
    shown = [
        "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")
        for cell in notebook.cells
        if cell.cell_type == "code"
    ]
    specs = KernelSpecManager(kernel_dirs=[str(environment / "kernels")])
    manager = KernelManager(kernel_name="reader", kernel_spec_manager=specs)
    client = NotebookClient(
        notebook, km=manager, timeout=PAGE_TIMEOUT, resources={"metadata": {"path": str(work)}}
    )
    # Offline: no Hub holds the book's ids from here, and the paste test covers the
    # reader with no variable set.
    try:
        client.execute(env=reader_environment(HF_HUB_OFFLINE="1"))
    except CellExecutionError as exc:
        return [f"{path.name}: a cell raised:\n{exc}"]
    finally:  # a kernel manager handed to nbclient is the caller's to shut down
        if manager.has_kernel:
            manager.shutdown_kernel(now=True)
    problems = []
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    for number, (cell, expected) in enumerate(zip(code_cells, shown, strict=True)):
        printed = "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")
        if number and normalise(printed) != normalise(expected):
            where = f"{path.name}, code cell {number + 1}"
            problems.append(first_difference(where, cell.source, expected, printed))
    return problems


@pytest.fixture(scope="session")
def notebook_runs(built_site, base_environment, tmp_path_factory):
    """Every downloaded notebook, run in a fresh environment per set of pins: name -> problems."""
    notebooks = downloaded_notebooks(built_site)
    groups: dict[str, list[str]] = {}
    for name, path in notebooks.items():
        groups.setdefault(set_up_cell(nbformat.read(path, as_version=4)), []).append(name)
    root = tmp_path_factory.mktemp("notebooks")

    def run_group(number: int, names: list[str]) -> dict[str, list[str]]:
        environment = fresh_environment(base_environment, root / f"environment-{number}")
        problems = {}
        for name in names:
            work = root / name.replace("/", "-")
            work.mkdir()
            problems[name] = run_notebook(notebooks[name], environment, work)
        return problems

    with ThreadPoolExecutor(3) as pool:
        runs = [pool.submit(run_group, n, names) for n, names in enumerate(groups.values())]
        return {name: problems for run in runs for name, problems in run.result().items()}


def test_the_notebooks_have_a_set_up_cell_and_link_the_published_site(built_site):
    site_url = mkdocs_config().site_url
    for name, path in downloaded_notebooks(built_site).items():
        text = path.read_text(encoding="utf-8")
        assert "127.0.0.1" not in text and "localhost" not in text, name
        notebook = nbformat.read(path, as_version=4)
        assert set_up_cell(notebook).startswith("# Set-up"), name
        if not name.startswith("labs/"):
            assert site_url in notebook.cells[0].source, name


@pytest.mark.parametrize(
    "name",
    [lab_notebook_path(p.stem) if p.suffix == ".py" else notebook_path(p) for p in site_pages()],
)
def test_a_downloaded_notebook_runs_in_a_fresh_environment(notebook_runs, name):
    assert not notebook_runs[name], "\n\n".join(notebook_runs[name])
