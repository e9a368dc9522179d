"""Each chapter as a notebook, generated from its page.

The prose becomes Markdown cells, each python block a code cell with its
includes expanded, and each expected output that cell's output: the notebook a
reader downloads shows what the page shows. The site build writes them to
notebooks/ in the built site; the tests run every page as this notebook
(tools/execute.py).
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

import nbformat

from tools.pages import (
    BOOK_PACKAGES,
    DOCS,
    INCLUDE,
    Block,
    Page,
    expand_includes,
    notebook_path,
    parse,
    site_path,
)

ADMONITION = re.compile(r'^(\s*)(!!!|\?\?\?\+?)\s+(\w+)(?:\s+"([^"]*)")?\s*$')
MARKER = re.compile(r"^\s*<!--.*-->\s*$")
FENCE = re.compile(r"^\s*(`{3,})")


def has_notebook(page: Page) -> bool:
    return bool(page.cells)


def to_notebook(page: Page, site_url: str | None) -> nbformat.NotebookNode:
    """The page as a notebook; links and images point at the published site at `site_url`
    (None: a page outside the site, such as a test's, whose links stay as they are)."""
    lines = page.path.read_text(encoding="utf-8").splitlines()
    python = {b.lineno: b for b in page.cells}
    url = _page_url(page.path, site_url) if site_url else None
    cells = [
        nbformat.v4.new_markdown_cell(
            f"*Generated from {f'[{url}]({url})' if url else page.path.name}: "
            "run the cells top to bottom.*"
        ),
        nbformat.v4.new_code_cell(setup_cell([b.code for b in page.cells])),
    ]
    prose: list[str] = []
    i = _after_front_matter(lines)
    while i < len(lines):
        lineno = i + 1
        if lineno in python:
            _flush(prose, cells, page.path, site_url)
            block = python[lineno]
            end = _fence_end(lines, i)
            cell = nbformat.v4.new_code_cell(_source(block, lines[i : end + 1]).rstrip("\n"))
            i = end + 1
            if _folded(lines, lineno - 1):  # in a collapsed box: its code hidden, as there
                cell.metadata["jupyter"] = {"source_hidden": True}
                cell.metadata["cellView"] = "form"  # Colab's way to hide it
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
    _flush(prose, cells, page.path, site_url, cut=False)
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    notebook.metadata["language_info"] = {"name": "python"}
    for number, cell in enumerate(notebook.cells):
        cell.id = f"cell-{number}"  # stable ids: the same page gives the same file
    return notebook


def _after_front_matter(lines: list[str]) -> int:
    """The index of the first line after the page's front matter, which the site does not
    show either."""
    if lines and lines[0] == "---":
        return lines.index("---", 1) + 1
    return 0


def _source(block: Block, fence: list[str]) -> str:
    """The block's code with the blank lines the page shows: pytest-codeblocks, and so
    `block.code`, drops those of a fence indented in a box."""
    indent = len(fence[0]) - len(fence[0].lstrip())
    if not indent:
        return block.code
    body = "".join(f"{line[indent:]}\n" for line in fence[1:-1])
    if not any(INCLUDE.match(line) for line in fence[1:-1]):
        return body
    return expand_includes(body, block.page, block.lineno + 1)[0]


def _folded(lines: list[str], i: int) -> bool:
    """Whether the fence on line `i` sits in a collapsed box, `??? example "..."`."""
    indent = len(lines[i]) - len(lines[i].lstrip())
    for line in reversed(lines[:i] if indent else []):
        match = ADMONITION.match(line)
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            return bool(match) and match.group(2) == "???"
    return False


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


def _flush(
    prose: list[str], cells: list, page: Path, site_url: str | None, cut: bool = True
) -> None:
    text = _math("\n".join(_admonitions_to_quotes(prose, cut)).strip())
    prose.clear()
    if text:
        cells.append(
            nbformat.v4.new_markdown_cell(
                absolute_links(text, page, site_url) if site_url else text
            )
        )


def _admonitions_to_quotes(lines: list[str], cut: bool = False) -> list[str]:
    """`!!! warning "Title"` and its indented body become a quoted block, and a collapsed
    box, `??? success "Solution"`, a collapsed <details> block. A box that a code cell
    cuts (`cut`: the lines end inside it, before a cell) stays a quote, collapsed or not:
    a <details> cannot hold a cell."""
    out: list[str] = []
    box: tuple[str, bool, list[str]] | None = None  # (title, collapsed, body)
    indent = 0
    for line in [*lines, None]:
        match = ADMONITION.match(line) if line is not None else None
        inside = box is not None and line is not None and not match
        if inside and (not line.strip() or line.startswith(" " * indent)):
            box[2].append(line[indent:])
            continue
        if box is not None:
            out.extend(_box(*box, quoted=not box[1] or (line is None and cut)))
            box = None
        if match:
            indent = len(match.group(1)) + 4
            title = match.group(4) or match.group(3).capitalize()
            box = (title, match.group(2).startswith("???"), [])
        elif line is not None:
            out.append(line)
    return out


def _box(title: str, collapsed: bool, body: list[str], quoted: bool) -> list[str]:
    if quoted:
        return [f"> **{title}**\n>", *[("> " + line).rstrip() for line in body]]
    return [f"<details>\n<summary>{title}</summary>\n", *body, "\n</details>\n"]


def _math(text: str) -> str:
    text = re.sub(r"\\\((.+?)\\\)", r"$\1$", text)
    return re.sub(r"\\\[(.+?)\\\]", r"$$\1$$", text, flags=re.DOTALL)


def _page_url(page: Path, site_url: str) -> str:
    return site_url + site_path(page)


def absolute_links(text: str, page: Path, site_url: str) -> str:
    """Markdown links relative to `page` made absolute, to the published site: a notebook
    is read away from the site (downloaded, in Colab)."""

    def absolute(match: re.Match) -> str:
        target = match.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:|#", target):
            return match.group(0)
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve()
        if resolved.suffix in {".md", ".ipynb"}:  # a chapter, or a lab (its notebook)
            url = _page_url(resolved, site_url)
        else:
            url = site_url + resolved.relative_to(DOCS).as_posix()
        return f"{match.group(1)}({url}{'#' + anchor if anchor else ''})"

    return re.sub(r"(\]\s*)\(([^)\s]+)\)", absolute, text)


def write_notebooks(site_dir: Path, site_url: str, pages: list[Path]) -> list[Path]:
    written = []
    for path in pages:
        page = parse(path)
        if has_notebook(page):
            target = site_dir / notebook_path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(to_notebook(page, site_url), target)
            written.append(target)
    return written


def requirements(code: list[str]) -> dict[str, str]:
    """What a notebook needs installed besides Python and torch, pinned to the versions the
    book is tested with: {distribution: version}.

    Read from the code itself: the distribution of every module it imports; numpy where it
    calls a tensor's `.numpy()`; `gguf` and `accelerate` where it names a GGUF file
    (transformers needs them, with no import in the notebook). torch is left to the
    reader's environment: Colab has its own build, and a pinned torch from the package
    index is the multi-GB CUDA one.
    """
    import importlib.metadata

    distributions = _distributions_by_module()
    modules, loads_gguf = set(), False
    for source in code:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules.add(node.module.split(".")[0])
            elif isinstance(node, ast.Attribute) and node.attr == "numpy":
                modules.add("numpy")  # torch's .numpy() needs numpy, which torch does not install
            elif _names_a_gguf(node):
                loads_gguf = True
    names = {
        name
        for module in modules - set(sys.stdlib_module_names) - {"torch", *BOOK_PACKAGES}
        for name in distributions.get(module, [module])
    }
    if loads_gguf:
        names |= {"gguf", "accelerate"}
    return {name: importlib.metadata.version(name) for name in sorted(names)}


@functools.cache
def _distributions_by_module() -> dict[str, list[str]]:
    """importlib.metadata.packages_distributions(), read once per process: it reads every
    installed file list, and the site build asks once for each of its notebooks."""
    import importlib.metadata

    return dict(importlib.metadata.packages_distributions())


def _names_a_gguf(node: ast.AST) -> bool:
    """`gguf_file=...`, a "gguf_file" key, or a "....gguf" file name."""
    if isinstance(node, ast.keyword):
        return node.arg == "gguf_file"
    return isinstance(node, ast.Constant) and str(node.value).endswith((".gguf", "gguf_file"))


def setup_cell(code: list[str]) -> str:
    """The notebook's first code cell. Outside the book's environment (Colab, a fresh
    virtual environment) it installs the pinned versions of what the notebook imports;
    where those versions are installed already, as in the book's environment, it does
    nothing."""
    import torch

    tested = requirements(code)
    torch_line = f"torch is yours to bring (tested with {torch.__version__.split('+')[0]})"
    if not tested:
        return f"# Set-up: nothing to install; {torch_line}."
    pins = "".join(f'\n    "{name}": "{version}",' for name, version in tested.items())
    return f"""\
# Set-up: installs the versions this notebook was tested with, where they are missing
# (Colab, a fresh environment); {torch_line}.
import importlib.metadata
import subprocess
import sys

tested = {{{pins}
}}


def installed(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


missing = [
    f"{{name}}=={{version}}" for name, version in tested.items() if installed(name) != version
]
if missing:
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *missing], check=True)"""


def colab_url(repo_url: str, notebook: str) -> str:
    """Colab opens notebooks from GitHub: the published site lives on the gh-pages branch.

    `notebook` is the notebook's path in the built site, e.g. notebooks/bert/tokenizer.ipynb.
    """
    repository = repo_url.removeprefix("https://github.com/").strip("/")
    return f"https://colab.research.google.com/github/{repository}/blob/gh-pages/{notebook}"
