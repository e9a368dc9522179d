"""Scaffold a new chapter: the page, its nav entry and a test stub.

    make chapter PAGE=bert/my-chapter TITLE="My chapter"
    python -m tools.scaffold bert/my-chapter "My chapter"

The page starts from tools/chapter_template.md and passes the checks as it is;
the test stub, tests/test_bert_my_chapter.py from tools/chapter_test_template.txt,
fails until its parity test is written. Test files are named after the page they
check, part first (`page_test_file`), so pages of the same name in two parts
never clash.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from snippets.book import REPO_ROOT

TEMPLATE = Path(__file__).with_name("chapter_template.md")

TEST_STUB = Path(__file__).with_name("chapter_test_template.txt")  # fills {page}, {function}


def page_test_file(page: str) -> Path:
    """A page's test file: bert/self-attention.md -> tests/test_bert_self_attention.py."""
    name = page.removesuffix(".md").replace("/", "_").replace("-", "_")
    return Path("tests") / f"test_{name}.py"


def scaffold(page: str, title: str, root: Path = REPO_ROOT) -> list[Path]:
    """Create docs/<page>.md, its nav entry and its test stub; return the new files."""
    folder, _, stem = page.removesuffix(".md").rpartition("/")
    page = f"{folder}/{stem}.md"
    doc = root / "docs" / page
    test = root / page_test_file(page)
    for path in (doc, test):
        if path.exists():
            raise SystemExit(f"{path.relative_to(root)} exists already")

    config = root / "mkdocs.yml"
    lines = config.read_text().splitlines(keepends=True)
    siblings = [i for i, line in enumerate(lines) if re.search(rf":\s+{folder}/\S+\.md\s*$", line)]
    if not folder or not siblings:
        raise SystemExit(
            f"no nav section in mkdocs.yml holds pages of docs/{folder}/: add the part's "
            "section first, then run this again"
        )
    last = lines[siblings[-1]]
    indent = last[: len(last) - len(last.lstrip())]
    lines.insert(siblings[-1] + 1, f"{indent}- {title}: {page}\n")

    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(TEMPLATE.read_text().replace("{title}", title))
    test.write_text(TEST_STUB.read_text().format(page=page, function=stem.replace("-", "_")))
    config.write_text("".join(lines))
    return [doc, test]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m tools.scaffold", description=__doc__)
    parser.add_argument("page", help="the page under docs/, e.g. bert/my-chapter")
    parser.add_argument("title", help="the chapter's title, as in the nav")
    args = parser.parse_args()
    for path in scaffold(args.page, args.title):
        print(f"created {path.relative_to(REPO_ROOT)}")
    print("added it to the nav in mkdocs.yml")
