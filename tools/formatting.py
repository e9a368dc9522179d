"""ruff's layout for the python blocks of the pages and of the chapter template.

ruff formats the python fences of a Markdown file itself. Two things stand in its way
here, and this module handles them:

- an include line, `--8<-- "module.py:section"`, is not Python, though it parses as an
  expression ruff would rewrite; it is handed to ruff as a comment and put back;
- a block in a box is indented by four spaces, which ruff does not count: the pages are
  formatted to LINE_LENGTH, so that no line of a box is wider than the page shows.

    python -m tools.formatting --check   # each page's diff; the tests check each page
    python -m tools.formatting           # formats them in place (`make format`)
"""

from __future__ import annotations

import argparse
import difflib
import re
import subprocess
import sys
from pathlib import Path

from tools.pages import DOCS, MAX_CODE_LINE, display, pages

TEMPLATE = Path(__file__).with_name("chapter") / "page.md"
LINE_LENGTH = MAX_CODE_LINE - 4  # a box's indent
INCLUDE_LINE = re.compile(r"^(\s*)(--8<-- .*)$", re.M)
HIDDEN_INCLUDE = re.compile(r"^(\s*)# include: (--8<-- .*)$", re.M)


def formatted(page: Path) -> str:
    """The page with its python blocks in ruff's layout."""
    hidden = INCLUDE_LINE.sub(r"\1# include: \2", page.read_text(encoding="utf-8"))
    ruff = Path(sys.executable).with_name("ruff")
    done = subprocess.run(
        [ruff, "format", "--line-length", str(LINE_LENGTH), "--stdin-filename", str(page), "-"],
        input=hidden,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise ValueError(f"{display(page)}: ruff could not format it:\n{done.stderr}")
    return HIDDEN_INCLUDE.sub(r"\1\2", done.stdout)


def problems(page: Path) -> list[str]:
    """Where the page's blocks are not in ruff's layout, each with ruff's version."""
    text = page.read_text(encoding="utf-8")
    layout = formatted(page)
    found = []
    matcher = difflib.SequenceMatcher(a=text.splitlines(), b=layout.splitlines(), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        was = "\n".join(f"  - {line}" for line in matcher.a[i1:i2])
        ruffs = "\n".join(f"  + {line}" for line in matcher.b[j1:j2])
        found.append(
            f"{display(page)}:{i1 + 1}: not in ruff's layout (`make format` rewrites it so):"
            f"\n{was}\n{ruffs}".rstrip()
        )
    return found


def book_pages() -> list[Path]:
    return [*pages(DOCS), TEMPLATE]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m tools.formatting", description=__doc__)
    parser.add_argument("--check", action="store_true", help="report, and change nothing")
    parser.add_argument("pages", nargs="*", type=Path, help="default: every page")
    args = parser.parse_args()
    chosen = [path.resolve() for path in args.pages] or book_pages()
    if args.check:
        found = [problem for page in chosen for problem in problems(page)]
        print("\n\n".join(found) or f"{len(chosen)} pages in ruff's layout")
        sys.exit(1 if found else 0)
    for page in chosen:
        layout = formatted(page)
        if layout != page.read_text(encoding="utf-8"):
            page.write_text(layout, encoding="utf-8")
            print(f"formatted {display(page)}")
