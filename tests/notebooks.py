"""Notebooks: each chapter as a notebook generated from its page, and the labs.

The prose becomes Markdown cells, each python block a code cell with its
includes expanded, and each expected output that cell's output: the notebook a
reader downloads shows what the page shows. The site build writes them to
notebooks/ in the built site; tests/test_notebooks.py executes every one.

Labs are notebooks written as jupytext "percent" scripts (docs/labs/*.py). The
site build executes each one whose source changed into docs/labs/<name>.ipynb (a
cell that raises fails the build) and renders it as a Markdown page, styled like
every chapter, its figures as separate images (`lab_page`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import tempfile
from pathlib import Path

import nbformat

from tests.docs_runner import DOCS, REPO_ROOT, Page, parse

LABS = DOCS / "labs"

ADMONITION = re.compile(r'^(\s*)(?:!!!|\?\?\?\+?)\s+(\w+)(?:\s+"([^"]*)")?\s*$')
MARKER = re.compile(r"^\s*<!--.*-->\s*$")
FENCE = re.compile(r"^\s*(`{3,})")


def notebook_path(page: Path) -> str:
    """docs/bert/tokenizer.md -> notebooks/bert/tokenizer.ipynb (in the built site)."""
    return "notebooks/" + page.relative_to(DOCS).with_suffix(".ipynb").as_posix()


def has_notebook(page: Page) -> bool:
    return any(b.syntax == "python" for b in page.blocks)


def to_notebook(page: Page, site_url: str, setup: str) -> nbformat.NotebookNode:
    """The page as a notebook; links and images point at the published site."""
    lines = page.path.read_text(encoding="utf-8").splitlines()
    python = {b.lineno: b for b in page.blocks if b.syntax == "python"}
    cells = [
        nbformat.v4.new_markdown_cell(
            f"*Generated from [{_page_url(page.path, site_url)}]"
            f"({_page_url(page.path, site_url)}): run the cells top to bottom.*"
        ),
        nbformat.v4.new_code_cell(setup),
    ]
    prose: list[str] = []
    i = 0
    while i < len(lines):
        lineno = i + 1
        if lineno in python:
            _flush(prose, cells, page.path, site_url)
            block = python[lineno]
            i = _fence_end(lines, i) + 1
            cell = nbformat.v4.new_code_cell(block.code.rstrip("\n"))
            if block.expected_output is not None:
                cell.outputs = [
                    nbformat.v4.new_output("stream", name="stdout", text=block.expected_output)
                ]
                i = _fence_end(lines, _next_fence(lines, i)) + 1
            cells.append(cell)
            continue
        if not MARKER.match(lines[i]):
            prose.append(lines[i])
        i += 1
    _flush(prose, cells, page.path, site_url)
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    notebook.metadata["language_info"] = {"name": "python"}
    for number, cell in enumerate(notebook.cells):
        cell.id = f"cell-{number}"  # stable ids: the same page gives the same file
    return notebook


def _next_fence(lines: list[str], i: int) -> int:
    while not FENCE.match(lines[i]):
        i += 1
    return i


def _fence_end(lines: list[str], start: int) -> int:
    ticks = FENCE.match(lines[start]).group(1)
    i = start + 1
    while not lines[i].lstrip().startswith(ticks):
        i += 1
    return i


def _flush(prose: list[str], cells: list, page: Path, site_url: str) -> None:
    text = "\n".join(_admonitions_to_quotes(prose)).strip()
    prose.clear()
    if text:
        cells.append(nbformat.v4.new_markdown_cell(_absolute_links(_math(text), page, site_url)))


def _admonitions_to_quotes(lines: list[str]) -> list[str]:
    """`!!! warning "Title"` and its indented body become a quoted block."""
    out, quoting = [], None
    for line in lines:
        match = ADMONITION.match(line)
        if match:
            quoting = len(match.group(1)) + 4
            title = match.group(3) or match.group(2).capitalize()
            out.append(f"> **{title}**\n>")
        elif quoting is not None and (not line.strip() or line.startswith(" " * quoting)):
            out.append(("> " + line[quoting:]).rstrip())
        else:
            quoting = None
            out.append(line)
    return out


def _math(text: str) -> str:
    text = re.sub(r"\\\((.+?)\\\)", r"$\1$", text)
    return re.sub(r"\\\[(.+?)\\\]", r"$$\1$$", text, flags=re.DOTALL)


def _page_url(page: Path, site_url: str) -> str:
    relative = page.relative_to(DOCS).with_suffix("")
    return site_url + ("" if relative.name == "index" else f"{relative.as_posix()}/")


def _absolute_links(text: str, page: Path, site_url: str) -> str:
    def absolute(match: re.Match) -> str:
        target = match.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:|#", target):
            return match.group(0)
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve()
        if resolved.suffix == ".md":
            url = _page_url(resolved, site_url)
        else:
            url = site_url + resolved.relative_to(DOCS).as_posix()
        return f"{match.group(1)}({url}{'#' + anchor if anchor else ''})"

    return re.sub(r"(\]\s*)\(([^)\s]+)\)", absolute, text)


def write_notebooks(site_dir: Path, site_url: str, setup: str, pages: list[Path]) -> list[Path]:
    written = []
    for path in pages:
        page = parse(path)
        if has_notebook(page):
            target = site_dir / notebook_path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(to_notebook(page, site_url, setup), target)
            written.append(target)
    return written


def setup_cell() -> str:
    """The first code cell: on Colab, install the versions the notebook was tested with."""
    from importlib.metadata import version

    pins = " ".join(f"{name}=={version(name)}" for name in ("transformers", "matplotlib"))
    return (
        "# On Colab, first install the versions this notebook was tested with.\n"
        "import sys\n\n"
        'if "google.colab" in sys.modules:\n'
        f"    %pip install --quiet {pins}"
    )


def colab_url(repo_url: str, notebook: str) -> str:
    """Colab opens notebooks from GitHub: the published site lives on the gh-pages branch.

    `notebook` is the notebook's path in the built site, e.g. notebooks/bert/tokenizer.ipynb.
    """
    repository = repo_url.removeprefix("https://github.com/").strip("/")
    return f"https://colab.research.google.com/github/{repository}/blob/gh-pages/{notebook}"


def build_labs(labs: Path = LABS, force: bool = False) -> list[str]:
    """Execute the labs whose source changed; return the names of those executed."""
    import jupytext
    from nbclient import NotebookClient

    manifest_path = labs / ".fingerprints.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    executed = []
    for source in sorted(labs.glob("*.py")):
        digest = hashlib.sha256(source.read_bytes())
        digest.update((REPO_ROOT / "snippets" / "models.py").read_bytes())
        target = source.with_suffix(".ipynb")
        if not force and target.exists() and manifest.get(source.name) == digest.hexdigest():
            continue
        notebook = jupytext.read(source)
        notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
        with tempfile.TemporaryDirectory() as scratch:
            resources = {"metadata": {"path": scratch}}
            client = NotebookClient(notebook, timeout=600, resources=resources)
            client.execute()  # raises CellExecutionError, naming the cell, on any error
        for cell in notebook.cells:  # progress bars and library warnings are noise on a page
            if cell.cell_type == "code":
                cell.outputs = [o for o in cell.outputs if o.get("name") != "stderr"]
        nbformat.write(notebook, target)
        manifest[source.name] = digest.hexdigest()
        executed.append(source.name)
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return executed


def lab_page(notebook: nbformat.NotebookNode, name: str, repo_url: str) -> tuple[str, dict]:
    """An executed lab as Markdown, and its figures: {file name under labs/<name>/: bytes}.

    Under the title, links to download the executed notebook and open it in Colab.
    """
    colab = colab_url(repo_url, f"labs/{name}.ipynb")
    links = (
        f'<p class="provenance" markdown>:material-download: [notebook]({name}.ipynb){{ download }}'
        f" · :material-rocket-launch-outline: [open in Colab]({colab})</p>"
    )
    parts, images = [], {}
    for number, cell in enumerate(notebook.cells):
        if cell.cell_type == "markdown":
            title, _, rest = cell.source.partition("\n")
            first = number == 0 and title.startswith("# ")
            parts.append(f"{title}\n\n{links}\n{rest}" if first else cell.source)
            continue
        parts.append(f"```python\n{cell.source}\n```")
        for index, output in enumerate(cell.outputs):
            where = f"labs/{name}.py, cell {number}, output {index}"
            if output.output_type == "stream":
                parts.append(f"```text\n{output.text.rstrip()}\n```")
            elif "image/png" in output.get("data", {}):
                image = f"cell-{number}-{index}.png"
                images[image] = base64.b64decode(output.data["image/png"])
                parts.append(f"![the figure drawn by the cell above]({name}/{image})")
            elif "text/plain" in output.get("data", {}):
                parts.append(f"```text\n{output.data['text/plain'].rstrip()}\n```")
            else:
                raise ValueError(f"{where}: no way to show a {output.output_type} output here")
    return "\n\n".join(parts) + "\n", images
