"""Scaffold a new chapter: the four files a chapter owns and its nav line, each a stub
that passes the checks, but the test, which fails until its parity test is written.

    make chapter PAGE=bert/my-chapter TITLE="My chapter"
    make chapter PAGE=gpt2/my-chapter TITLE="My chapter" MODULE=my_gpt2_chapter
    make chapter PAGE=assistant/chat TITLE="The chat format" PART="Part V: an assistant"
    python -m tools.scaffold bert/my-chapter "My chapter" [--module my_chapter]

From the templates in tools/chapter/:

- docs/bert/my-chapter.md, the page, its front matter included (the home page's list
  and the tour read it);
- snippets/my_chapter.py, the code the page includes and its tests import;
- snippets/figures/bert_my_chapter.py, its figures;
- tests/test_bert_my_chapter.py, its parity tests: a stub that fails until written;
- and one line in the nav of mkdocs.yml, after the other chapters of its part.

Test and figure files are named after the page, part first (`page_test_file`), so pages
of the same name in two parts never clash; the module is named after the page alone.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from snippets.book import NOT_CHAPTERS, REPO_ROOT

TEMPLATES = Path(__file__).with_name("chapter")


def page_test_file(page: str) -> Path:
    """A page's test file: bert/self-attention.md -> tests/test_bert_self_attention.py."""
    return Path("tests") / f"test_{_part_and_stem(page)}.py"


def page_figures_file(page: str) -> Path:
    """A page's figures: bert/self-attention.md -> snippets/figures/bert_self_attention.py."""
    return Path("snippets") / "figures" / f"{_part_and_stem(page)}.py"


def _part_and_stem(page: str) -> str:
    return page.removesuffix(".md").replace("/", "_").replace("-", "_")


def _with_nav_line(lines: list[str], folder: str, entry: str, part: str | None) -> list[str]:
    """mkdocs.yml's lines with `entry` after the last chapter of docs/<folder>/, or, for a
    new part, in a new section after the last part's last chapter."""
    chapter = re.compile(r"^(\s*)- .*:\s+(\S+)\.md\s*$")  # a title may hold colons
    placed = [i for i, line in enumerate(lines) if re.search(rf":\s+{folder}/\S+\.md\s*$", line)]
    if placed and folder:
        indent = chapter.match(lines[placed[-1]]).group(1)
        return [*lines[: placed[-1] + 1], indent + entry, *lines[placed[-1] + 1 :]]
    if not part or not folder:
        raise SystemExit(
            f"no nav section in mkdocs.yml holds pages of docs/{folder}/: to start a new "
            'part, name it: PART="Part V: its title" (--part)'
        )
    chapters = [
        i
        for i, line in enumerate(lines)
        if (found := chapter.match(line))
        and "/" in found.group(2)
        and not found.group(2).startswith(NOT_CHAPTERS)
    ]
    last = chapters[-1]
    indent = chapter.match(lines[last]).group(1)
    section = [f'{indent[:-4]}- "{part}":\n', indent + entry]
    return [*lines[: last + 1], *section, *lines[last + 1 :]]


def _fill(template: str, values: dict[str, str]) -> str:
    text = (TEMPLATES / template).read_text(encoding="utf-8")
    for key, value in values.items():
        text = text.replace(f"{{{key}}}", value)
    return text


def scaffold(
    page: str,
    title: str,
    module: str | None = None,
    part: str | None = None,
    root: Path = REPO_ROOT,
):
    """Write the chapter's files and its nav line; return the files written, in `root`.
    The first chapter of a new part names the part: its nav section goes after the last
    part's."""
    folder, _, stem = page.removesuffix(".md").rpartition("/")
    page = f"{folder}/{stem}.md"
    module = module or stem.replace("-", "_")
    values = {
        "title": title,
        "page": page,
        "module": module,
        "figure": f"{folder}-{stem}.svg",
        "function": stem.replace("-", "_"),
    }
    files = {
        Path("docs") / page: _fill("page.md", values),
        Path("snippets") / f"{module}.py": _fill("module.txt", values),
        page_figures_file(page): _fill("figures.txt", values),
        page_test_file(page): _fill("test.txt", values),
    }
    for path in files:
        if (root / path).exists():
            another = path.parent == Path("snippets")
            hint = ": give the chapter's module another name (MODULE=...)" if another else ""
            raise SystemExit(f"{path} exists already{hint}")

    config = root / "mkdocs.yml"
    lines = config.read_text().splitlines(keepends=True)
    # a title with a colon, as "Part III" has, is a YAML string in double quotes
    label = json.dumps(title, ensure_ascii=False) if ":" in title or "#" in title else title
    lines = _with_nav_line(lines, folder, f"- {label}: {page}\n", part)

    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    config.write_text("".join(lines))
    # the module's name decides where its import sorts, in the figures and the test
    python = [str(root / path) for path in files if path.suffix == ".py"]
    ruff = [sys.executable, "-m", "ruff", "check", "--quiet", "--no-cache", "--fix", "--select=I"]
    subprocess.run([*ruff, *python], cwd=root, check=True)
    return [root / path for path in files]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m tools.scaffold", description=__doc__)
    parser.add_argument("page", help="the page under docs/, e.g. bert/my-chapter")
    parser.add_argument("title", help="the chapter's title, as in the nav")
    parser.add_argument("--module", help="the module under snippets/ (default: the page's name)")
    parser.add_argument("--part", help="the title of a new part, for its first chapter")
    args = parser.parse_args()
    for path in scaffold(args.page, args.title, args.module, args.part):
        print(f"created {path.relative_to(REPO_ROOT)}")
    print("added it to the nav in mkdocs.yml")
