"""Drift: the book's pages under today's releases of the libraries it teaches, not its pins.

Readers install whatever is newest, and a new transformers can change what a page prints, or
break it. `make test-latest` builds .venv-latest/, the book's install with the newest releases
of PACKAGES (torch stays the pinned CPU build), and runs this module there:

    python -m tools.latest [docs/PART/PAGE.md ...]    # every page when none is named

Each page runs once, as its notebook in a fresh kernel, as the tests run it (tools/execute.py),
and each python block that printed other than its page shows, or raised, is a row of a table
in Markdown: page, block, what changed (the first differing line, shown and printed, or the
exception). Above it, the versions installed beside the pinned ones; below it, how many pages
print what they show. The table is printed and written to artifacts/latest.md, which the
weekly workflow (.github/workflows/latest.yml) keeps. Drift is a report, not a failure: the
exit status is 0 whatever the pages print, and non-zero only when the check could not run.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from snippets.book import REPO_ROOT, write_atomically
from snippets.hub import use_offline_hub
from tools.execute import BlockFailure, BlockSkipped, PageRun, run_page
from tools.pages import Block, display, pages, parse

# installed at their newest releases in .venv-latest/: the Makefile's LATEST_PACKAGES names
# the same (tests/test_tools_latest.py holds them equal)
PACKAGES = (
    "transformers",
    "tokenizers",
    "peft",
    "trl",
    "sentence-transformers",
    "gguf",
    "huggingface-hub",
)
REPORT = REPO_ROOT / "artifacts" / "latest.md"
SHORT = 60  # characters kept of a shown or printed line
LONG = 160  # characters kept of an exception
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")
SHOWN = re.compile(r"^  shown:   (.*)$", re.M)  # tools/execute.py's check_output
PRINTED = re.compile(r"^  printed: (.*)$", re.M)
EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b.*$", re.M)


@dataclass
class Row:
    page: str
    block: str  # file:line of the block's fence
    change: str  # one line


def changes(run: PageRun) -> list[Row]:
    """A row for each python block of the run's page that printed other than the page
    shows, or raised; blocks skipped, or not run after one that raised, have none."""
    rows = []
    for block in run.page.blocks:
        if block.syntax != "python":
            continue
        try:
            run.check(block)
        except BlockSkipped:
            continue
        except BlockFailure as failure:
            change = what_changed(block, str(failure), run.printed.get(block.lineno, ""))
            if run.failed_at is block:
                after = [b for b in run.page.cells if b.lineno > block.lineno]
                if after:
                    change += f" (the {_blocks(len(after))} after it did not run)"
            rows.append(Row(display(run.page.path), block.where, change))
    return rows


def what_changed(block: Block, failure: str, printed: str) -> str:
    """A block's failure as one short line of Markdown."""
    shown, instead = SHOWN.search(failure), PRINTED.search(failure)
    if shown and instead:
        shown_line, printed_line = _around_difference(shown[1], instead[1])
        return f"shown {_code(shown_line)}, printed {_code(printed_line)}"
    first = failure.splitlines()[0].removeprefix(f"{block.where}: ") if failure else ""
    first = re.sub(rf"^{re.escape(display(block.page))}:(\d+):", r"line \1:", first)
    if first.startswith("the block prints output that the page does not show"):
        line = next((line for line in printed.splitlines() if line.strip()), "")
        return f"shown nothing, printed {_code(line)}"
    exceptions = [match[0] for match in EXCEPTION.finditer(failure)]
    if first.endswith(":") and exceptions:  # the notebook's set-up cell: its exception is last
        first = f"{first} {exceptions[-1]}"
    return _cell(_shorten(first, LONG))


def versions(pinned: dict[str, str], installed: dict[str, str]) -> list[str]:
    """PACKAGES pinned and installed, as a Markdown table, and every other pinned
    distribution installed at another version (the newer releases needed it)."""
    lines = ["| package | pinned | installed |", "|---|---|---|"]
    for name in PACKAGES:
        was, now = pinned.get(_key(name), "?"), installed.get(_key(name), "not installed")
        lines.append(f"| {name} | {was} | {now if _public(now) == was else f'**{now}**'} |")
    moved = [
        f"{name} {pinned[name]} → {version}"
        for name, version in sorted(installed.items())
        if name in pinned and name not in map(_key, PACKAGES) and _public(version) != pinned[name]
    ]
    return [*lines, "", f"Also moved: {', '.join(moved)}." if moved else "Nothing else moved."]


def report(
    rows: list[Row], passed: int, total: int, pinned: dict[str, str], installed: dict[str, str]
) -> str:
    """The whole report in Markdown: the versions, the table of changes, the count."""
    lines = ["# The book under today's releases", "", *versions(pinned, installed), ""]
    if rows:
        lines += ["| page | block | what changed |", "|---|---|---|"]
        lines += [f"| {row.page} | {row.block} | {row.change} |" for row in rows]
        lines.append("")
    lines.append(f"{passed} of {total} pages print what they show.")
    return "\n".join(lines) + "\n"


def pinned_versions() -> dict[str, str]:
    """{name: version} as the book pins them: constraints.txt, and pyproject.toml's direct
    dependencies (sentence-transformers is only there)."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    lines = (REPO_ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
    lines += project["project"]["dependencies"]
    return {_key(match[1]): match[2] for line in lines if (match := PIN.match(line.strip()))}


def installed_versions() -> dict[str, str]:
    """{name: version} of every distribution this interpreter sees."""
    return {_key(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()}


def kernel_is_this_python() -> bool:
    """Whether the notebooks' kernel ("python3") runs this interpreter. Each notebook's
    set-up cell installs the versions this process sees wherever they are missing: in
    another environment it would install today's releases there."""
    from jupyter_client.kernelspec import KernelSpecManager

    command = KernelSpecManager().get_kernel_spec("python3").argv[0]
    # jupyter_client runs these names as the interpreter that starts the kernel
    names = {"python", f"python{sys.version_info[0]}", "python{}.{}".format(*sys.version_info)}
    return command in names or Path(command).absolute() == Path(sys.executable).absolute()


def main(arguments: list[str]) -> int:
    if any(argument.startswith("-") for argument in arguments):
        print(__doc__, file=sys.stderr)
        return 2
    chosen = [Path(argument).absolute() for argument in arguments] or pages()
    if missing := [display(path) for path in chosen if not path.is_file()]:
        print(f"no such page: {', '.join(missing)}", file=sys.stderr)
        return 2
    if not kernel_is_this_python():
        print(f"the python3 kernel is not {sys.executable}: nothing was run", file=sys.stderr)
        return 2
    use_offline_hub()  # the pages read the cache `make setup` filled, as in the tests
    os.environ["MPLBACKEND"] = "Agg"
    rows, passed, total, crashed = [], 0, 0, 0
    for path in chosen:
        page = parse(path)
        if not page.cells:
            continue
        total += 1
        print(f"running {display(path)}", file=sys.stderr, flush=True)
        try:
            run = run_page(page, "as-is")
        except Exception as error:  # not the page's failure: the kernel's, or the machine's
            crashed += 1
            why = f"not run: {type(error).__name__}: {error}".splitlines()[0]
            rows.append(Row(display(path), display(path), _cell(_shorten(why, LONG))))
            continue
        try:
            found = changes(run)
        finally:
            shutil.rmtree(run.workdir, ignore_errors=True)
        rows += found
        passed += not found
    text = report(rows, passed, total, pinned_versions(), installed_versions())
    print(text, end="")
    write_atomically(REPORT, text)
    print(f"written to {display(REPORT)}", file=sys.stderr)
    return 1 if total and crashed == total else 0


def _around_difference(shown: str, printed: str) -> tuple[str, str]:
    """Two lines that differ, each from a little before their first differing character:
    where a long line of numbers changes may lie past what the table keeps."""
    if "(nothing)" in (shown, printed):
        return shown, printed
    pairs = enumerate(zip(shown, printed, strict=False))
    first = next((i for i, (a, b) in pairs if a != b), min(len(shown), len(printed)))
    cut = max(0, first - SHORT // 3)
    return (shown, printed) if cut == 0 else ("…" + shown[cut:], "…" + printed[cut:])


def _blocks(count: int) -> str:
    return f"{count} block{'s' if count > 1 else ''}"


def _key(name: str) -> str:
    """A distribution's name as the package index compares names (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _public(version: str) -> str:
    """2.13.0+cpu -> 2.13.0: the pins name no local build."""
    return version.split("+")[0]


def _shorten(text: str, width: int) -> str:
    text = text.strip()
    return text if len(text) <= width else text[: width - 1] + "…"


def _cell(text: str) -> str:
    """Text in a Markdown table's cell: a pipe would end it."""
    return text.replace("|", "\\|")


def _code(line: str) -> str:
    """A shown or printed line, short, as code in a table's cell; check_output's "(nothing)"
    past the last line as it is."""
    if line == "(nothing)":
        return line
    if not line.strip():
        return "a blank line"
    line = _shorten(line, SHORT)
    return _cell(f"`` {line} ``" if "`" in line else f"`{line}`")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
