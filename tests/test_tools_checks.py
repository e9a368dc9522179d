"""Deliberately broken chapters: each mistake a contributor can make gets a message
naming the file, the line and the cause (tools/checks.py, tools/pages.py,
tools/execute.py)."""

import pytest

from tools import checks, pages
from tools.execute import BlockFailure, run_page
from tools.pages import DOCS, display

CASES = {
    "failing snippet": (
        "# Broken\n\n```python\nimport torch\n\nx = torch.ones(2, 3)\ny = x @ x\n```\n",
        "broken.md:7: RuntimeError: mat1 and mat2 shapes cannot be multiplied",
    ),
    "silently skipped fence": (
        '# Broken\n\n```python title="model.py"\nprint(1)\n```\n',
        'broken.md:3: fence ```python title="model.py" is never run',
    ),
    "blocks not chained": (
        "# Broken\n\n```python\nx = 1\n```\n\nMore.\n\n```python\nprint(x)\n```\n",
        "broken.md:9: this python block is not chained",
    ),
    "missing figure": (
        "# Broken\n\nText.\n\n![attention](../figures/no-such-figure.svg)\n",
        "broken.md:5: missing image ../figures/no-such-figure.svg: no function in "
        "snippets/figures/ draws it",
    ),
    "dead link": (
        "# Broken\n\nSee [the tokenizer](tokeniser.md).\n",
        "broken.md:3: dead link: tokeniser.md",
    ),
    "dead anchor": (
        "# Broken\n\nSee\n[padding](other.md#padding-to-the-longest).\n",
        "broken.md:4: dead link: other.md#padding-to-the-longest (docs/bert/other.md has no "
        "heading or id 'padding-to-the-longest')",
    ),
    "page absent from the nav": (
        "# Broken\n\nA page nobody links.\n",
        "broken.md:1: the page is not in the nav of mkdocs.yml",
    ),
}


def problems_of(page, docs):
    """Everything the checks say about one page, as a contributor would see it."""
    parsed = pages.parse(page)
    problems = list(parsed.problems)
    problems += checks.nav_problems(page, docs, nav={"bert/other.md"})
    problems += checks.link_problems(page, docs)
    problems += checks.image_problems(page, docs / "figures")
    run = run_page(parsed)
    for block in parsed.blocks:
        try:
            run.check(block)
        except BlockFailure as failure:
            problems.append(str(failure))
    return problems


@pytest.mark.parametrize("case", CASES)
def test_a_broken_chapter_gets_file_line_and_cause(tmp_path, monkeypatch, case):
    markdown, expected = CASES[case]
    docs = tmp_path / "docs"
    (docs / "bert").mkdir(parents=True)
    (docs / "bert" / "other.md").write_text("# Other\n\n## Padding to the longest sequence\n")
    page = docs / "bert" / "broken.md"
    page.write_text(markdown)
    monkeypatch.setattr(pages, "REPO_ROOT", tmp_path)  # paths shown as docs/...
    problems = problems_of(page, docs)
    assert any(expected in problem for problem in problems), "\n".join(problems)
    assert all("docs/bert/broken.md:" in p or "docs/bert/other.md" in p for p in problems)


def test_a_chapter_without_its_front_matter_is_named(tmp_path):
    docs = tmp_path / "docs"
    (docs / "bert").mkdir(parents=True)
    page = docs / "bert" / "tokenizer.md"
    page.write_text('---\ndescription: "Ids."\n---\n# The tokenizer\n')
    [problem] = checks.front_matter_problems(page, docs)
    assert problem.startswith(f"{display(page)}:1: the chapter's front matter lacks its tour")
    assert "hands_on:" in problem
    assert checks.front_matter_problems(DOCS / "bert" / "tokenizer.md") == []


def test_a_description_in_markdown_is_named(tmp_path):
    docs = tmp_path / "docs"
    (docs / "bert").mkdir(parents=True)
    page = docs / "bert" / "tokenizer.md"
    tour = 'tour:\n  label: "Tokenizer"\n  hands_on: "ids"\n'
    page.write_text(f'---\ndescription: "Ids by `WordPiece`."\n{tour}---\n# The tokenizer\n')
    [problem] = checks.front_matter_problems(page, docs)
    assert "lacks a description in plain text, with no Markdown or HTML" in problem
    page.write_text(f'---\ndescription: "Ids by WordPiece."\n{tour}---\n# The tokenizer\n')
    assert checks.front_matter_problems(page, docs) == []
    linked = '"The [CLS] vector, as [BERT](bert.md) has it."'
    page.write_text(f"---\ndescription: {linked}\n{tour}---\n# T\n")
    [problem] = checks.front_matter_problems(page, docs)
    assert "lacks a description in plain text" in problem
    page.write_text(f'---\ndescription: "The [CLS] vector."\n{tour}---\n# The tokenizer\n')
    assert checks.front_matter_problems(page, docs) == []
