"""The built site, run as its readers run it (`make test-reader`; CI runs it after `make test`).

Each page's code runs once per numeric configuration in CI: `make test` runs it as it is
(tests/test_docs.py), and here under the two others (tools/numerics.py): each notebook
downloaded from the built site under compatible-1-thread, and under avx2-2-threads either
its notebook or, for the chapters of the one-session run below, that run. What a reader
copies instead is proven to be that code, byte for byte, without running it again.

- Notebook: each notebook downloaded from the built site runs top to bottom in a fresh
  virtual environment outside the repository, holding torch (the local wheel), the
  kernel that runs it, and only the pins its set-up cell names. Each cell must print
  what the page shows. Notebooks whose set-up cells name the same pins share one
  environment, built by uv.
- Paste: the code of each chapter's built HTML is its Markdown's, includes expanded, and its
  notebook's cells are the same code with the same outputs. Each model and file the
  chapters load, with the call they type, loads in a fresh interpreter in an empty
  folder outside the repository with no HF_* variable: the set-up filled the cache that
  any Python reads.
- Sequence: every chapter of every part, in the nav's order, pasted one after the other
  into one interpreter under avx2-2-threads, as a reader who keeps a session open: no
  chapter may leave the session unusable for the next, and each block must print what
  its page shows.

A failure names the page, the block, the configuration and the first line that differs.
"""

from __future__ import annotations

import ast
import difflib
import functools
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from snippets.book import nav, parts
from tools import timings
from tools.execute import KERNEL_OPTIONS
from tools.numerics import CONFIGURATIONS, describe
from tools.pages import (
    DOCS,
    lab_notebook_path,
    mkdocs_config,
    notebook_path,
    pages,
    parse,
    site_path,
)

# The loads with no HF_* variable spend most of their time asleep: with no network and no
# HF_HUB_OFFLINE, huggingface_hub retries each Hub lookup for about 23 s before it reads
# the cache. Running them all at once overlaps the waits; each holds about 0.5 GB.
LOADS_AT_ONCE = 16
PAGE_TIMEOUT = 1800  # seconds: the slowest page, training included, with every retry
# the page runs here: `make test` runs the machine as it is
READER_CONFIGURATIONS = [name for name in CONFIGURATIONS if name != "as-is"]
# the one-session run: every chapter of every part, in nav order, under this configuration;
# it is their run under it, and their notebooks run under the other one only
SESSION_CONFIGURATION = "avx2-2-threads"

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
        normalise(shown).splitlines(),
        normalise(printed).splitlines(),
        "shown on the page",
        "printed",
        lineterm="",
        n=1,
    )
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
    HF_HOME and HF_HUB_CACHE, when whoever started the tests set them; no MPLBACKEND. And
    no PYTHONDONTWRITEBYTECODE, which some CI machines set: a reader's Python keeps what it
    compiles, and without it each notebook in a fresh environment compiled torch and
    transformers again (importing them took 7.0 s each time, against 3.8 s once cached)."""
    harness = ("HF_", "TRANSFORMERS_", "MPLBACKEND", "PYTEST_", "PYTHONDONTWRITEBYTECODE")
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
        cwd=work,
        env=environment,
        capture_output=True,
        timeout=PAGE_TIMEOUT,
        check=False,
    )
    results = folder / "results.json"
    return json.loads(results.read_text()) if results.exists() else []


def site_pages() -> list[Path]:
    """Every page of the site with python blocks, chapters and labs, in nav order."""
    in_nav = [DOCS / page for _, section in nav() for _, page in section]
    chapters = {p for p in pages() if parse(p).cells}
    labs = {p.with_suffix(".py") for p in in_nav if p.parent.name == "labs"}
    return [
        p.with_suffix(".py") if p.with_suffix(".py") in labs else p
        for p in in_nav
        if p in chapters or p.with_suffix(".py") in labs
    ]


# ---------------------------------------------------------------- paste


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


def test_the_downloaded_notebooks_hold_the_code_the_tests_run(built_site):
    """A chapter's notebook, after its set-up cell, is its python blocks byte for byte, but
    for blank lines, each with the output the page shows: running the notebook is running
    the page. (pytest-codeblocks, and so the tests, drop the blank lines of a block in a
    box; the notebook keeps them, as the page shows them.)"""
    for page in site_pages():
        if page.suffix != ".md":
            continue
        notebook = nbformat.read(built_site / notebook_path(page), as_version=4)
        cells = [(unspaced(cell.source), printed(cell)) for cell in code_cells(notebook)[1:]]
        blocks = [(unspaced(b.code), b.expected_output or "") for b in parse(page).cells]
        assert [(code, normalise(out)) for code, out in cells] == [
            (code, normalise(out)) for code, out in blocks
        ], notebook_path(page)


def unspaced(code: str) -> str:
    return "\n".join(line for line in code.splitlines() if line.strip())


def hub_loads(site: Path) -> dict[str, str]:
    """Each call the chapters type to load from the Hub (`X.from_pretrained(...)`,
    `hf_hub_download(...)`, `SentenceTransformer(...)`) whose arguments are all written
    out, as a script that imports what the call needs the way its page does: call -> script.
    """
    loads = {}
    for page in site_pages():
        if page.suffix != ".md":
            continue
        trees = [ast.parse(block["code"]) for block in shown_blocks(site, page)]
        imports = [
            node
            for tree in trees
            for node in tree.body
            if isinstance(node, ast.Import | ast.ImportFrom)
        ]
        for node in (node for tree in trees for node in ast.walk(tree)):
            if isinstance(node, ast.Call) and _loads_from_the_hub(node):
                call = ast.unparse(node)
                loads.setdefault(call, "\n".join([*map(ast.unparse, imports), call]))
    return loads


def _loads_from_the_hub(call: ast.Call) -> bool:
    function = call.func
    name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
    if name not in {"from_pretrained", "hf_hub_download", "SentenceTransformer"}:
        return False
    arguments = [*call.args, *(keyword.value for keyword in call.keywords)]
    return bool(call.args) and all(isinstance(a, ast.Constant) for a in arguments)


@pytest.fixture(scope="session", autouse=True)
def loads_with_no_hf_variable(built_site, tmp_path_factory):
    """Each Hub load of the chapters, in its own fresh interpreter with no HF_* variable,
    started with the session: they spend minutes asleep in huggingface_hub's retries,
    while the notebooks run. call -> the load's stderr if it failed, else None."""
    root = tmp_path_factory.mktemp("loads")

    def load(number: int, script: str) -> str | None:
        work = root / f"load-{number}"
        work.mkdir()
        result = subprocess.run(
            [sys.executable, "-c", script],
            cwd=work,
            env=reader_environment(),
            capture_output=True,
            text=True,
            timeout=PAGE_TIMEOUT,
            check=False,
        )
        return None if result.returncode == 0 else result.stderr[-3000:]

    pool = ThreadPoolExecutor(LOADS_AT_ONCE)
    loads = hub_loads(built_site)
    yield {call: pool.submit(load, n, script) for n, (call, script) in enumerate(loads.items())}
    pool.shutdown(cancel_futures=True)


# ---------------------------------------------------------------- sequence


def session_chapters() -> list[Path]:
    return [DOCS / page for _, chapters in parts() for _, page in chapters]


def session_blocks(site: Path) -> list[dict]:
    """The session chapters' blocks as the site shows them, each also named by its line on
    its page (the two lists match, or the test of the shown code fails)."""
    blocks = []
    for page in session_chapters():
        shown = shown_blocks(site, page)
        for block, source in zip(shown, parse(page).cells, strict=False):
            block["where"] = f"{source.where} ({block['where']})"
        blocks += shown
    return blocks


def test_chapters_pasted_one_after_another_into_one_session(built_site, tmp_path):
    """Every chapter of every part in one interpreter, in nav order, under
    SESSION_CONFIGURATION: every block prints what its page shows. Offline
    (HF_HUB_OFFLINE=1): what is tested here is the session the chapters leave behind."""
    blocks = session_blocks(built_site)
    environment = reader_environment(HF_HUB_OFFLINE="1", **CONFIGURATIONS[SESSION_CONFIGURATION])
    results = paste(blocks, tmp_path / "session", environment)
    under = f"under {describe(SESSION_CONFIGURATION)}, pasted after the chapters before it"
    problems = [f"{problem}\n({under})" for problem in failures(blocks, results)]
    assert not problems, "\n\n".join(problems)


# ---------------------------------------------------------------- notebooks


def notebook_name(page: Path) -> str:
    """A page's notebook, as a path in the built site."""
    return lab_notebook_path(page.stem) if page.suffix == ".py" else notebook_path(page)


def downloaded_notebooks(site: Path) -> dict[str, Path]:
    """Every notebook the built site offers for download, the slowest page's first (by its
    time in the last `make test`, tools/timings.py): name -> file."""
    seconds = timings.seconds_by_page()
    pages = sorted(site_pages(), key=lambda page: -seconds.get(page, 0))
    return {notebook_name(page): site / notebook_name(page) for page in pages}


def notebook_configurations() -> list[tuple[str, str]]:
    """(notebook, configuration) for each run of a notebook here: every configuration
    but the machine as it is, and but SESSION_CONFIGURATION for the session's chapters."""
    in_session = set(session_chapters())
    return [
        (notebook_name(page), configuration)
        for page in site_pages()
        for configuration in READER_CONFIGURATIONS
        if not (page in in_session and configuration == SESSION_CONFIGURATION)
    ]


def set_up_cell(notebook) -> str:
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    return code[0].source


def pins_of(set_up: str) -> list[str]:
    """The pins a notebook's set-up cell installs where they are missing: its `tested`."""
    assignment = next(
        node
        for node in ast.parse(set_up).body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "tested"
    )
    return [f"{name}=={version}" for name, version in ast.literal_eval(assignment.value).items()]


def pip_sources() -> list[str]:
    """uv's options for the package sources pip is configured with (find-links and extra
    indexes: where this machine's pip finds torch's CPU build), which uv does not read;
    like pip, uv then takes the best match from any of them."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        env=os.environ,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    options = []
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        option = key.rpartition(".")[2]
        for source in value.strip("'\"").split():
            local = source.removeprefix("file://")
            if source.startswith("file:") and not Path(local).exists():
                continue  # a mirror this machine does not have
            if option == "find-links":
                options += ["--find-links", local]
            elif option == "extra-index-url":
                options += ["--extra-index-url", source]
    unique = list(dict.fromkeys(zip(options[::2], options[1::2], strict=True)))
    return ["--index-strategy", "unsafe-best-match", *(part for pair in unique for part in pair)]


def fresh_environment(folder: Path, pins: list[str]) -> Path:
    """A new virtual environment with torch (the book's build), the kernel that runs the
    notebooks, as Colab has both, and `pins` with what they depend on: what the set-up cell
    would install. Built by uv, from its cache after the first."""
    from importlib.metadata import version

    import uv

    run = functools.partial(
        subprocess.run, check=True, env=reader_environment(), capture_output=True
    )
    run([uv.find_uv_bin(), "venv", "--quiet", "--python", sys._base_executable, str(folder)])
    python = str(folder / "bin" / "python")
    install = [uv.find_uv_bin(), "pip", "install", "--quiet", "--python", python, *pip_sources()]
    run([*install, f"torch=={version('torch')}", f"ipykernel=={version('ipykernel')}", *pins])
    kernel = folder / "kernels" / "reader"
    kernel.mkdir(parents=True)
    argv = [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (kernel / "kernel.json").write_text(
        json.dumps({"argv": argv, "language": "python", "display_name": "reader"})
    )
    return folder


def code_cells(notebook) -> list:
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def printed(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")


def run_notebook(
    name: str, path: Path, environment: Path, work: Path, configuration: str
) -> list[str]:
    """Run a downloaded notebook in `environment`'s kernel under a numeric configuration
    (tools/numerics.py); the problems found, each naming the page's block."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    notebook = nbformat.read(path, as_version=4)
    shown = [printed(cell) for cell in code_cells(notebook)]
    specs = KernelSpecManager(kernel_dirs=[str(environment / "kernels")])
    manager = KernelManager(kernel_name="reader", kernel_spec_manager=specs)
    client = NotebookClient(
        notebook,
        km=manager,
        timeout=PAGE_TIMEOUT,
        resources={"metadata": {"path": str(work)}},
        **KERNEL_OPTIONS,
    )
    under = f"under {describe(configuration)}"
    # Offline: no Hub holds the book's ids from here, and the paste test covers the
    # reader with no variable set.
    try:
        client.execute(env=reader_environment(HF_HUB_OFFLINE="1", **CONFIGURATIONS[configuration]))
    except CellExecutionError as exc:
        return [f"{name}, {under}: a cell raised:\n{exc}"]
    finally:  # a kernel manager handed to nbclient is the caller's to shut down
        if manager.has_kernel:
            manager.shutdown_kernel(now=True)
    blocks = []  # a lab's cells are no page's blocks; a chapter's are its page's
    if name.startswith("notebooks/"):
        blocks = parse(DOCS / Path(name).relative_to("notebooks").with_suffix(".md")).cells
    problems = []
    for number, (cell, expected) in enumerate(zip(code_cells(notebook), shown, strict=True)):
        if number and normalise(printed(cell)) != normalise(expected):
            where = blocks[number - 1].where if blocks else f"{name}, code cell {number + 1}"
            problems.append(
                first_difference(f"{where}, {under}", cell.source, expected, printed(cell))
            )
    return problems


@pytest.fixture(scope="session")
def notebook_runs(built_site, tmp_path_factory):
    """Every downloaded notebook under the configurations of notebook_configurations(), in
    a fresh environment per set of pins: (name, configuration) -> problems."""
    notebooks = downloaded_notebooks(built_site)
    groups: dict[str, list[str]] = {}
    for name, path in notebooks.items():
        groups.setdefault(set_up_cell(nbformat.read(path, as_version=4)), []).append(name)
    root = tmp_path_factory.mktemp("notebooks")
    environments = {}
    for number, (set_up, names) in enumerate(groups.items()):
        pins = pins_of(set_up) if "tested = " in set_up else []
        environment = fresh_environment(root / f"environment-{number}", pins)
        environments |= dict.fromkeys(names, environment)

    def run(name: str, configuration: str) -> list[str]:
        work = root / f"{name.replace('/', '-')}-{configuration}"
        work.mkdir()
        return run_notebook(name, notebooks[name], environments[name], work, configuration)

    # two at a time, on two cores: compatible-1-thread runs one thread, avx2-2-threads two.
    # The slowest notebooks start first, so that none starts last while the other slot
    # sits idle
    wanted = set(notebook_configurations())
    with ThreadPoolExecutor(2) as pool:
        runs = {
            (name, configuration): pool.submit(run, name, configuration)
            for name in notebooks
            for configuration in READER_CONFIGURATIONS
            if (name, configuration) in wanted
        }
        return {key: run.result() for key, run in runs.items()}


def test_the_notebooks_have_a_set_up_cell_and_link_the_published_site(built_site):
    site_url = mkdocs_config().site_url
    for name, path in downloaded_notebooks(built_site).items():
        text = path.read_text(encoding="utf-8")
        assert "127.0.0.1" not in text and "localhost" not in text, name
        notebook = nbformat.read(path, as_version=4)
        assert set_up_cell(notebook).startswith("# Set-up"), name
        if not name.startswith("labs/"):
            assert site_url in notebook.cells[0].source, name


@pytest.mark.parametrize(("name", "configuration"), notebook_configurations())
def test_a_downloaded_notebook_runs_in_a_fresh_environment(notebook_runs, name, configuration):
    problems = notebook_runs[name, configuration]
    assert not problems, "\n\n".join(problems)


def test_what_the_chapters_load_loads_with_no_hf_variable(loads_with_no_hf_variable):
    """A reader's Python has no HF_HUB_OFFLINE: each load the chapters type reads the cache
    the set-up filled, from an empty folder, after huggingface_hub's retries."""
    runs = loads_with_no_hf_variable
    assert len(runs) >= 5, f"only {len(runs)} Hub loads found in the chapters"
    problems = [f"{call} raised:\n{run.result()}" for call, run in runs.items() if run.result()]
    assert not problems, "\n\n".join(problems)
