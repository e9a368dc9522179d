"""A page of the book as its code blocks, with includes expanded, and what is wrong with it.

The markers are pytest-codeblocks' markers:

    <!--pytest-codeblocks:cont-->              this block continues the page's session
    <!--pytest-codeblocks:expected-output-->   the next fence is the block's output
    <!--pytest.mark.skip(reason="...")-->      do not run the next block, and say why

pytest-codeblocks' own parser imports pytest, which the site build must not need,
so the fences are read here, the same way (tests/test_tools_pages.py holds the two
parsers equal on every page). `--8<--` includes are expanded by the same
pymdownx.snippets configuration the site uses, so the code that runs is the code
on the page. Every problem found names the page, the line and the cause.

This module also holds the one rule from a page's path to its addresses in the
built site: its URL (`site_path`) and its notebook (`notebook_path`).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from snippets.book import DOCS, MKDOCS_YML, REPO_ROOT

FIGURES = DOCS / "figures"  # drawn by the build, not pages
LABS = DOCS / "labs"

MARKER = re.compile(r"^<!--[-\s]*pytest-codeblocks:(.*)-->$")
MARK = re.compile(r"^<!--[-\s]*(pytest\.mark\..*)-->$")
INCLUDE = re.compile(r"""^(\s*)-{1,}8<-{1,}\s+(["'])([^"']+)\2\s*$""")
# info strings that look like Python but are not exactly `python`: pytest-codeblocks
# collects only `python`, so these would be shown on the site and never run
PYTHONISH = re.compile(r"^\s*\{?\s*\.?(py|python|python3|pycon|ipython|ipython3)\b", re.I)
RUNNABLE = {"python", "sh", "bash"}
BOOK_PACKAGES = {"snippets", "tools"}  # this repository's own: not on the package index
MAX_CODE_LINE = 100  # ruff's line length, which a code block on a 1280 px screen shows whole
# a float32 rounding difference's digits in an output, such as 8.58e-06 or 2.3e-05: they
# change from one CPU to the next (a bound such as "below 1e-05" has no such digits)
ROUNDING_DIGITS = re.compile(r"\b\d\.\d+e-0?[5-9]\b", re.I)


@dataclass
class Fence:
    """A fenced block as pytest-codeblocks reads it, and where its markers were."""

    lineno: int  # the line of the opening fence
    syntax: str  # the info string
    code: str
    marks: list[str] = field(default_factory=list)  # e.g. 'pytest.mark.skip(reason="...")'
    chained: bool = False  # a <!--pytest-codeblocks:cont--> marker came before it
    expected_output: str | None = None
    expected_lineno: int | None = None  # the line of the expected-output marker


@dataclass
class Block:
    page: Path
    lineno: int  # the line of the opening fence on the page
    syntax: str
    code: str  # as run: includes expanded
    origins: list[tuple[str, int]]  # for each line of `code`: (file, line) it came from
    expected_output: str | None
    expected_lineno: int | None
    skip_reason: str | None = None

    @property
    def where(self) -> str:
        return f"{display(self.page)}:{self.lineno}"


@dataclass
class Page:
    path: Path
    blocks: list[Block] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # each names file, line and cause

    @property
    def cells(self) -> list[Block]:
        """The blocks its notebook runs, in order: the python blocks not skipped."""
        return [b for b in self.blocks if b.syntax == "python" and b.skip_reason is None]


def display(path: Path) -> str:
    """A path as a contributor reads it: relative to the repository when inside it."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def pages(root: Path = DOCS) -> list[Path]:
    """Every Markdown page of the book."""
    return sorted(p for p in root.rglob("*.md") if FIGURES not in p.parents)


def site_path(source: Path) -> str:
    """docs/bert/tokenizer.md -> bert/tokenizer/ (MkDocs' directory URLs); a lab's
    jupytext source docs/labs/x.py -> labs/x/; docs/index.md -> the empty path."""
    relative = source.relative_to(DOCS).with_suffix("")
    return "" if relative.name == "index" else f"{relative.as_posix()}/"


def lab_notebook_path(name: str) -> str:
    """A lab's executed notebook in the built site, beside its page (mkdocs-jupyter puts it
    there): attention-explorer -> labs/attention-explorer/attention-explorer.ipynb."""
    return f"labs/{name}/{name}.ipynb"


def notebook_path(source: Path) -> str:
    """docs/bert/tokenizer.md -> notebooks/bert/tokenizer.ipynb (in the built site)."""
    return "notebooks/" + source.relative_to(DOCS).with_suffix(".ipynb").as_posix()


# ---------------------------------------------------------------- fences


def read_fences(text: str) -> list[Fence]:
    """Every fenced block of a page, with its markers; as pytest-codeblocks reads them.

    Raises ValueError, naming the line, where pytest-codeblocks would raise.
    """
    lines = text.splitlines(keepends=True)
    fences: list[Fence] = []
    marks: list[str] = []
    chained = False
    awaiting_output: tuple[Fence, int] | None = None
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        lineno = i + 1
        i += 1
        if not stripped:
            continue
        if marker := MARKER.match(stripped):
            keyword = marker.group(1).strip("- ")
            if keyword == "expected-output":
                if not fences or fences[-1].expected_output is not None:
                    raise ValueError(f"line {lineno}: an expected-output marker with no block")
                awaiting_output = (fences[-1], lineno)
            elif keyword == "cont":
                chained = True
            else:
                raise ValueError(f"line {lineno}: pytest-codeblocks:{keyword} is not supported")
            continue
        if mark := MARK.match(stripped):
            marks.append(mark.group(1))
            continue
        if not stripped.startswith("```"):
            continue
        ticks = len(stripped) - len(stripped.lstrip("`"))
        indent = len(lines[i - 1]) - len(lines[i - 1].lstrip())
        start = i
        body, i = _fence_body(lines, i, ticks, indent, lineno)
        if awaiting_output is not None:
            if indent and any(not line.strip() for line in lines[start : i - 1]):
                raise ValueError(
                    f"line {lineno}: an expected output indented under a box holds a blank "
                    "line, which pytest-codeblocks drops. Print something on that line."
                )
            awaiting_output[0].expected_output = body
            awaiting_output[0].expected_lineno = awaiting_output[1]
            awaiting_output = None
        else:  # a chained block is its own test here; pytest-codeblocks glues it on
            fences.append(Fence(lineno, stripped[ticks:], body, marks, chained))
            marks, chained = [], False
    return fences


def _fence_body(lines: list[str], i: int, ticks: int, indent: int, opened: int):
    body = []
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.lstrip()[:ticks] == "`" * ticks:
            return "".join(body), i
        body.append(line[min(indent, len(line) - len(line.lstrip())) :])
    raise ValueError(f"line {opened}: the fence is never closed")


# ---------------------------------------------------------------- pages


def parse(path: Path) -> Page:
    page = Page(path)
    try:
        fences = read_fences(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        page.problems.append(f"{display(path)}: cannot be parsed: {exc}")
        return page
    first_python = True
    for fence in fences:
        where = f"{display(path)}:{fence.lineno}"
        if fence.syntax not in RUNNABLE:
            if PYTHONISH.match(fence.syntax):
                page.problems.append(
                    f"{where}: fence ```{fence.syntax} is never run (pytest-codeblocks only "
                    "collects fences whose info string is exactly `python`). Use a plain "
                    "```python fence; put a title or line numbers in the prose instead."
                )
            continue
        if fence.syntax == "python":
            page.problems.extend(_chaining_problems(fence, first_python, where))
            page.problems.extend(_long_lines(fence.code, path, fence.lineno + 1))
            page.problems.extend(_blank_runs(fence.code, path, fence.lineno + 1))
            first_python = False
        try:
            code, origins = expand_includes(fence.code, path, fence.lineno + 1)
        except IncludeError as exc:
            page.problems.append(str(exc))
            code, origins = fence.code, []
        block = Block(
            path,
            fence.lineno,
            fence.syntax,
            code,
            origins,
            fence.expected_output,
            fence.expected_lineno,
        )
        if fence.syntax == "python":
            page.problems.extend(_book_imports(block))
            page.problems.extend(_rounding_digits(block))
            page.problems.extend(_wide_output(block))
        block.skip_reason = _skip_reason(fence.marks, where, page.problems)
        page.blocks.append(block)
    return page


def _rounding_digits(block: Block) -> list[str]:
    lines = (block.expected_output or "").splitlines()
    return [
        f"{display(block.page)}:{block.expected_lineno + 2 + i}: the output prints a rounding "
        f"difference's digits ({match.group()}), which change from one CPU to the next. Print "
        'a bound against the tolerance instead, e.g. print("largest difference below 1e-4:", '
        "torch.allclose(a, b, rtol=0, atol=1e-4)) (docs/contributing.md, what a page may print)"
        for i, line in enumerate(lines)
        if (match := ROUNDING_DIGITS.search(line))
    ]


def _chaining_problems(fence: Fence, first_python: bool, where: str) -> list[str]:
    if first_python and fence.chained:
        return [
            f"{where}: the first python block is marked as a continuation, but there is "
            "nothing before it to continue. Remove the marker."
        ]
    if not first_python and not fence.chained:
        return [
            f"{where}: this python block is not chained to the page's session. Put "
            "<!--pytest-codeblocks:cont--> on the line before its fence, so that a reader "
            "running the page top to bottom gets what the tests ran."
        ]
    return []


def _book_imports(block: Block) -> list[str]:
    """An import of this repository's own packages, which a reader's Python does not have."""
    try:
        tree = ast.parse(block.code)
    except SyntaxError:
        return []  # the run reports it, with its line
    problems = []
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        for name in names:
            if name.split(".")[0] in BOOK_PACKAGES:
                where = "{}:{}".format(*block.origins[node.lineno - 1]) if block.origins else ""
                problems.append(
                    f"{where or block.where}: `import {name}` runs here but not in a reader's "
                    "Python, which has no snippets/ or tools/ (a pasted page, a notebook, Colab). "
                    'Include the code on the page with --8<-- "module.py:section" instead.'
                )
    return problems


def _blank_runs(code: str, page: Path, first_line: int) -> list[str]:
    """Three or more blank lines in a row: the source has at most two, as ruff formats it."""
    lines = code.splitlines()
    return [
        f"{display(page)}:{first_line + i}: three blank lines in a row in a code block. Leave "
        "at most two, as ruff does; an included section brings none at its ends."
        for i in range(2, len(lines))
        if not any(line.strip() for line in lines[i - 2 : i + 1])
        and (i == 2 or lines[i - 3].strip())
    ]


def _long_lines(code: str, page: Path, first_line: int) -> list[str]:
    numbered = [(n, line) for n, line in enumerate(code.splitlines()) if not INCLUDE.match(line)]
    return _wide_lines(numbered, page, first_line, "a code line", "Wrap it as `ruff format` would.")


def _wide_output(block: Block) -> list[str]:
    if block.expected_output is None:
        return []
    return _wide_lines(
        enumerate(block.expected_output.splitlines()),
        block.page,
        block.expected_lineno + 2,
        "an output line",
        "Print it in shorter lines (pprint(..., compact=True) wraps a list).",
    )


def _wide_lines(numbered, page: Path, first_line: int, what: str, fix: str) -> list[str]:
    """The (offset, line) pairs wider than the page shows, each named by file and line."""
    return [
        f"{display(page)}:{first_line + offset}: {what} of {len(line)} characters: the page "
        f"shows about {MAX_CODE_LINE} before the reader must scroll sideways. {fix}"
        for offset, line in numbered
        if len(line) > MAX_CODE_LINE
    ]


def _skip_reason(marks: list[str], where: str, problems: list[str]) -> str | None:
    """The reason of a <!--pytest.mark.skip(reason="...")--> marker, read without pytest."""
    reason = None
    for text in marks:
        try:
            call = ast.parse(text, mode="eval").body
            name = ast.unparse(call.func if isinstance(call, ast.Call) else call)
            arguments = call.args if isinstance(call, ast.Call) else []
            keywords = call.keywords if isinstance(call, ast.Call) else []
            values = [ast.literal_eval(a) for a in arguments]
            options = {k.arg: ast.literal_eval(k.value) for k in keywords}
        except (SyntaxError, ValueError) as exc:
            problems.append(f"{where}: marker <!--{text}--> is not valid: {exc!r}")
            continue
        if name != "pytest.mark.skip":
            problems.append(
                f"{where}: <!--{text}--> is not supported; a block either runs or is "
                'skipped with <!--pytest.mark.skip(reason="...")-->.'
            )
            continue
        reason = options.get("reason") or (values[0] if values else "")
        if not reason:
            problems.append(
                f"{where}: <!--{text}--> gives no reason. Write "
                '<!--pytest.mark.skip(reason="why this block cannot run here")-->.'
            )
            reason = "no reason given"
    return reason


# ---------------------------------------------------------------- includes


class IncludeError(Exception):
    pass


@functools.cache
def _snippet_preprocessor():
    """pymdownx.snippets (trimmed: tools/trimmed_snippets.py) configured as in mkdocs.yml."""
    import markdown

    snippets_config = dict(mkdocs_config().mdx_configs.get("tools.trimmed_snippets", {}))
    md = markdown.Markdown(
        extensions=["tools.trimmed_snippets"],
        extension_configs={"tools.trimmed_snippets": snippets_config},
    )
    return md.preprocessors["snippet"], [Path(p) for p in snippets_config["base_path"]]


@functools.cache
def mkdocs_config():
    """mkdocs.yml, loaded once, with the snippets' base path made absolute so that
    includes expand from any working directory."""
    from mkdocs.config import load_config

    with contextlib.redirect_stderr(io.StringIO()):
        config = load_config(str(MKDOCS_YML))
    snippets_config = config.mdx_configs.setdefault("tools.trimmed_snippets", {})
    snippets_config["base_path"] = [  # relative to mkdocs.yml, as MkDocs reads them
        str(MKDOCS_YML.parent / p) for p in snippets_config.get("base_path", ["."])
    ]
    return config


def expand_includes(code: str, page: Path, first_line: int) -> tuple[str, list[tuple[str, int]]]:
    """Expand `--8<--` lines; return the code and where each of its lines came from."""
    lines, origins = [], []
    for offset, line in enumerate(code.splitlines()):
        page_line = (display(page), first_line + offset)
        match = INCLUDE.match(line)
        if not match:
            lines.append(line)
            origins.append(page_line)
            continue
        preprocessor, base_paths = _snippet_preprocessor()
        try:
            included = preprocessor.run([line])
        except Exception as exc:  # pymdownx raises SnippetMissingError and friends
            raise IncludeError(f"{page_line[0]}:{page_line[1]}: {exc}") from None
        lines.extend(included)
        origins.extend(_locate(match.group(3), match.group(1), included, base_paths, page_line))
    return "\n".join(lines) + "\n", origins


def included_modules(page: Path) -> list[str]:
    """The snippets/ files a page includes, e.g. ['bert_by_hand.py']."""
    names = {
        m.group(3).split(":")[0] for m in map(INCLUDE.match, page.read_text().splitlines()) if m
    }
    return sorted(names)


def _locate(target, indent, included, base_paths, fallback):
    """Map included lines back to lines of the snippet file, for tracebacks."""
    name = target.split(":")[0]
    path = next((b / name for b in base_paths if (b / name).is_file()), None)
    if path is None:
        return [fallback] * len(included)
    file_lines = path.read_text().splitlines()
    out, cursor = [], 0
    for line in included:
        bare = line[len(indent) :]
        while cursor < len(file_lines) and file_lines[cursor] != bare:
            cursor += 1
        out.append((display(path), cursor + 1) if cursor < len(file_lines) else fallback)
        cursor += 1
    return out
