"""Run every code block of the book exactly as the reader sees it.

Pages are parsed with pytest-codeblocks' own parser, so the markers are its
markers:

    <!--pytest-codeblocks:cont-->              this block continues the page's session
    <!--pytest-codeblocks:expected-output-->   the next fence is the block's output
    <!--pytest.mark.skip(reason="...")-->      do not run the next block, and say why

Unlike pytest-codeblocks' runner, which glues a chain of blocks into one test
with one expected output, each block here is its own test: blocks run in page
order in one namespace per page, each with its own expected output, and a
failure names the page, the line, the exception type and the traceback.
`--8<--` includes are expanded first, by the same pymdownx.snippets
configuration the site uses, so the code that runs is the code on the page.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import io
import linecache
import os
import re
import subprocess
import tempfile
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pytest_codeblocks.main import extract_from_buffer

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCS = REPO_ROOT / "docs"
GENERATED = DOCS / "figures"
# how long each chapter's notebook took in the last test run; the site prints it
TIMINGS = REPO_ROOT / ".cache" / "page-timings.json"

CONT = re.compile(r"^\s*<!--[-\s]*pytest-codeblocks:\s*cont[-\s]*-->\s*$")
INCLUDE = re.compile(r"""^(\s*)-{1,}8<-{1,}\s+(["'])([^"']+)\2\s*$""")
# info strings that look like Python but are not exactly `python`: pytest-codeblocks
# collects only `python`, so these would be shown on the site and never run
PYTHONISH = re.compile(r"^\s*\{?\s*\.?(py|python|python3|pycon|ipython|ipython3)\b", re.I)
RUNNABLE = {"python", "sh", "bash"}
MAX_CODE_LINE = 100  # as ruff's line length for the book's code: wider lines scroll sideways


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
    namespace: dict = field(default_factory=lambda: {"__name__": "__main__"})
    workdir: Path | None = None  # a scratch folder: snippets must not rely on this repository
    broken_at: str | None = None  # the block that failed; later blocks are skipped
    # torch's process-wide settings as the page left them (e.g. after set_grad_enabled(False)):
    # restored for its next block, kept away from the tests and pages that run after it
    torch_settings: dict | None = None


# outcomes of the book's own blocks ("executed", "skipped", "failed"), for the run's summary
TALLY: Counter[str] = Counter()


def display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def pages(root: Path = DOCS) -> list[Path]:
    return sorted(p for p in root.rglob("*.md") if GENERATED not in p.parents)


@functools.cache
def _snippet_preprocessor():
    """pymdownx.snippets configured exactly as in mkdocs.yml."""
    import markdown
    from mkdocs.config import load_config

    with contextlib.redirect_stderr(io.StringIO()):
        config = load_config(str(REPO_ROOT / "mkdocs.yml"))
    snippets_config = dict(config.mdx_configs.get("pymdownx.snippets", {}))
    # absolute, so that the runner works from any working directory
    snippets_config["base_path"] = [
        str(REPO_ROOT / p) for p in snippets_config.get("base_path", ["."])
    ]
    md = markdown.Markdown(
        extensions=["pymdownx.snippets"],
        extension_configs={"pymdownx.snippets": snippets_config},
    )
    return md.preprocessors["snippet"], [Path(p) for p in snippets_config["base_path"]]


def _long_lines(code: str, page: Path, first_line: int) -> list[str]:
    return [
        f"{display(page)}:{first_line + offset}: a code line of {len(line)} characters: the "
        f"page shows about {MAX_CODE_LINE} before the reader must scroll sideways. Wrap it "
        "as `ruff format` would."
        for offset, line in enumerate(code.splitlines())
        if len(line) > MAX_CODE_LINE and not INCLUDE.match(line)
    ]


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


class IncludeError(Exception):
    pass


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


def parse(path: Path) -> Page:
    page = Page(path)
    text = path.read_text(encoding="utf-8")
    source_lines = text.splitlines(keepends=True)
    # pytest-codeblocks would glue continued blocks into one; blank the markers
    # (keeping line numbers) and remember where they were.
    cont_lines = [i + 1 for i, line in enumerate(source_lines) if CONT.match(line)]
    for i in cont_lines:
        source_lines[i - 1] = "\n"
    try:
        raw_blocks = extract_from_buffer(io.StringIO("".join(source_lines)))
    except RuntimeError as exc:
        page.problems.append(f"{display(path)}: cannot be parsed: {exc}")
        return page

    previous_fence = 0
    first_python = True
    for raw in raw_blocks:
        where = f"{display(path)}:{raw.lineno}"
        if raw.syntax not in RUNNABLE:
            if PYTHONISH.match(raw.syntax or ""):
                page.problems.append(
                    f"{where}: fence ```{raw.syntax} is never run (pytest-codeblocks only "
                    "collects fences whose info string is exactly `python`). Use a plain "
                    "```python fence; put a title or line numbers in the prose instead."
                )
            previous_fence = raw.lineno
            continue
        chained = any(previous_fence < c < raw.lineno for c in cont_lines)
        if raw.syntax == "python":
            if first_python and chained:
                page.problems.append(
                    f"{where}: the first python block is marked as a continuation, but "
                    "there is nothing before it to continue. Remove the marker."
                )
            elif not first_python and not chained:
                page.problems.append(
                    f"{where}: this python block is not chained to the page's session. Put "
                    "<!--pytest-codeblocks:cont--> on the line before its fence, so that a "
                    "reader running the page top to bottom gets what the tests ran."
                )
            first_python = False
        try:
            code, origins = expand_includes(raw.code, path, raw.lineno + 1)
        except IncludeError as exc:
            page.problems.append(str(exc))
            code, origins = raw.code, []
        block = Block(
            page=path,
            lineno=raw.lineno,
            syntax=raw.syntax,
            code=code,
            origins=origins,
            expected_output=raw.expected_output,
            expected_lineno=_expected_lineno(source_lines, raw.lineno)
            if raw.expected_output is not None
            else None,
        )
        block.skip_reason = _skip_reason(raw.marks, where, page.problems)
        if raw.syntax == "python":
            page.problems.extend(_long_lines(raw.code, path, raw.lineno + 1))
        page.blocks.append(block)
        previous_fence = raw.lineno
    return page


def _expected_lineno(lines: list[str], fence_line: int) -> int | None:
    for i in range(fence_line, len(lines)):
        if "pytest-codeblocks:expected-output" in lines[i]:
            return i + 1
    return None


def _skip_reason(marks: list[str], where: str, problems: list[str]) -> str | None:
    reason = None
    for text in marks:
        try:
            mark = eval(text, {"pytest": pytest}).mark
        except Exception as exc:
            problems.append(f"{where}: marker <!--{text}--> is not valid: {exc!r}")
            continue
        if mark.name != "skip":
            problems.append(
                f"{where}: <!--{text}--> is not supported; a block either runs or is "
                'skipped with <!--pytest.mark.skip(reason="...")-->.'
            )
            continue
        reason = mark.kwargs.get("reason") or (mark.args[0] if mark.args else "")
        if not reason:
            problems.append(
                f"{where}: <!--{text}--> gives no reason. Write "
                '<!--pytest.mark.skip(reason="why this block cannot run here")-->.'
            )
            reason = "no reason given"
    return reason


# ---------------------------------------------------------------- running


# compiled block name -> where each of its lines came from; functions defined in one
# block and failing in a later one are traced back to their own page line
_ORIGINS: dict[str, list[tuple[str, int]]] = {}


class BlockFailure(Exception):
    """A block raised, or printed something other than its expected output."""


def run(block: Block, page: Page) -> str:
    """Run one block in its page's namespace; return what it printed."""
    if block.skip_reason is not None:
        pytest.skip(f"{block.where}: {block.skip_reason}")
    if page.broken_at is not None:
        pytest.skip(
            f"{block.where}: not run, an earlier block of this page failed ({page.broken_at})"
        )
    try:
        output = _execute(block, page)
        _check_output(block, output)
    except BlockFailure:
        page.broken_at = block.where
        raise
    return output


def _execute(block: Block, page: Page) -> str:
    if block.syntax != "python":
        result = subprocess.run(
            block.code, shell=True, capture_output=True, text=True, cwd=REPO_ROOT,
            executable="/bin/bash" if block.syntax == "bash" else None,
        )  # fmt: skip
        if result.returncode != 0:
            raise BlockFailure(
                f"{block.where}: the {block.syntax} block exited with status "
                f"{result.returncode}\n{result.stdout}{result.stderr}"
            )
        return result.stdout

    filename = f"<{block.where}>"
    linecache.cache[filename] = (len(block.code), None, block.code.splitlines(True), filename)
    _ORIGINS[filename] = block.origins
    if page.workdir is None:
        page.workdir = Path(tempfile.mkdtemp(prefix="tbt-page-"))
    stdout = io.StringIO()
    cwd = os.getcwd()
    try:
        os.chdir(page.workdir)
        with contextlib.redirect_stdout(stdout), _torch_settings_of(page):
            exec(compile(block.code, filename, "exec"), page.namespace)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt | pytest.skip.Exception):
            raise
        raise BlockFailure(_describe_exception(block, filename, exc, stdout.getvalue())) from None
    finally:
        os.chdir(cwd)
    return stdout.getvalue()


@contextlib.contextmanager
def _torch_settings_of(page: Page):
    """Run a block with the torch settings its page left, then put back the caller's."""
    import torch

    def current():
        return {"grad": torch.is_grad_enabled(), "dtype": torch.get_default_dtype()}

    def apply(settings):
        torch.set_grad_enabled(settings["grad"])
        torch.set_default_dtype(settings["dtype"])

    outside = current()
    apply(page.torch_settings or outside)
    try:
        yield
    finally:
        page.torch_settings = current()
        apply(outside)


def _describe_exception(block: Block, filename: str, exc: BaseException, printed: str) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    while frames and frames[0].filename != filename:  # drop the runner's own frames
        frames.pop(0)
    mapped = traceback.StackSummary()
    for frame in frames:
        origins = _ORIGINS.get(frame.filename, [])
        if 0 < frame.lineno <= len(origins):
            file, line = origins[frame.lineno - 1]
            frame = traceback.FrameSummary(file, line, frame.name, line=frame.line)
        mapped.append(frame)
    # the statement of the block that failed: where on the page to look first
    failing = f"{mapped[0].filename}:{mapped[0].lineno}" if mapped else block.where
    kind = type(exc).__name__
    parts = [
        f"{failing}: {kind}: {exc}",
        f"  (in the python block that starts at {block.where})",
        "",
        "Traceback (most recent call last):",
        *("".join(mapped.format()).rstrip().splitlines()),
        traceback.format_exception_only(exc)[-1].rstrip(),
    ]
    if printed:
        parts += ["", "The block printed, before failing:", printed.rstrip()]
    return "\n".join(parts).rstrip()


def _check_output(block: Block, output: str) -> None:
    expected = block.expected_output
    if expected is None:
        if output.strip():
            raise BlockFailure(
                f"{block.where}: the block prints output that the page does not show. Add, "
                "right after the block:\n\n<!--pytest-codeblocks:expected-output-->\n```text\n"
                f"{output.rstrip()}\n```"
            )
        return
    if normalise(output) == normalise(expected):
        return
    diff = difflib.unified_diff(
        normalise(expected).splitlines(),
        normalise(output).splitlines(),
        fromfile=f"shown on the page ({display(block.page)}:{block.expected_lineno})",
        tofile=f"printed by the block ({block.where})",
        lineterm="",
    )
    raise BlockFailure(
        f"{block.where}: the block's output differs from the expected output on the page\n"
        + "\n".join(diff)
    )


def normalise(text: str) -> str:
    """Trailing spaces and blank lines at the end are invisible on the page."""
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())
