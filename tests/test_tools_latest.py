"""tools/latest.py, the drift check: a block that prints other than its page shows, or
raises, is a row naming its file:line and what changed; pages that print what they show
have none, and the report says how many pages that is. The runs here are made by hand, as
tools/execute.py records them, so that no kernel starts."""

import re
import textwrap

from snippets.book import REPO_ROOT
from tools import latest
from tools.execute import PageRun
from tools.pages import display, parse

DRIFTED = """
    # T

    ```python
    print("logits torch.Size([1, 4, 50257])")
    print("next token: ' the'")
    ```

    <!--pytest-codeblocks:expected-output-->
    ```text
    logits torch.Size([1, 4, 50257])
    next token: ' a' | p = 0.31
    ```

    <!--pytest-codeblocks:cont-->
    ```python
    print("done")
    ```

    <!--pytest-codeblocks:expected-output-->
    ```text
    done
    ```
"""
PINNED = {"transformers": "5.23.0", "tokenizers": "0.23.3", "numpy": "2.4.6"}


def page_from(tmp_path, markdown):
    path = tmp_path / "chapter.md"
    path.write_text(textwrap.dedent(markdown).lstrip())
    return parse(path)


def test_a_block_whose_output_drifted_is_a_row_with_its_line_shown_and_printed(tmp_path):
    page = page_from(tmp_path, DRIFTED)
    first, second = page.cells
    printed = "logits torch.Size([1, 4, 50257])\nnext token: ' the'\n"
    run = PageRun(page, tmp_path, printed={first.lineno: printed, second.lineno: "done\n"})
    rows = latest.changes(run)
    installed = {**PINNED, "transformers": "5.24.0", "numpy": "2.5.0"}
    text = latest.report(rows, 0, 1, PINNED, installed)
    assert f"| {first.where} | shown `next token: ' a' \\| p = 0.31`, printed " in text
    assert f"{first.where} |" in text and first.where.endswith("chapter.md:3")
    assert "printed `next token: ' the'` |" in text
    assert second.where not in text  # it printed what the page shows
    assert "| transformers | 5.23.0 | **5.24.0** |" in text
    assert "Also moved: numpy 2.4.6 → 2.5.0." in text
    assert text.endswith("\n0 of 1 pages print what they show.\n")


def test_a_block_that_raised_is_a_row_with_its_exception_and_the_blocks_not_run(tmp_path):
    page = page_from(tmp_path, DRIFTED)
    first = page.cells[0]
    # as tools/execute.py words it: the failing statement's file:line, the exception
    failure = (
        f"{display(page.path)}:4: AttributeError: 'GPT2' object has no attribute 'wte'\n"
        f"  (in the python block that starts at {first.where})\n\nTraceback ..."
    )
    run = PageRun(page, tmp_path, failed_at=first, failure=failure)
    (row,) = latest.changes(run)
    assert (row.block, row.change) == (
        first.where,
        "line 4: AttributeError: 'GPT2' object has no attribute 'wte' "
        "(the 1 block after it did not run)",
    )


def test_a_long_line_is_cut_where_it_changed(tmp_path):
    block = page_from(tmp_path, DRIFTED).cells[0]
    row = [f"{i / 7:.4f}" for i in range(20)]
    shown, printed = " ".join(row), " ".join([*row[:12], "9.9999", *row[13:]])
    change = latest.what_changed(block, f"  shown:   {shown}\n  printed: {printed}", "")
    assert change.startswith("shown `…") and "9.9999" in change and "1.7143" in change


def test_a_page_that_prints_what_it_shows_has_no_row(tmp_path):
    page = page_from(tmp_path, DRIFTED)
    shown = {block.lineno: block.expected_output for block in page.cells}
    assert latest.changes(PageRun(page, tmp_path, printed=shown)) == []
    text = latest.report([], 1, 1, PINNED, PINNED)
    assert "| page |" not in text and "Nothing else moved." in text
    assert text.endswith("\n1 of 1 pages print what they show.\n")


def test_it_writes_the_report_and_exits_0_when_pages_drift(tmp_path, monkeypatch, capsys):
    page = page_from(tmp_path, DRIFTED)
    monkeypatch.setattr(latest, "REPORT", tmp_path / "artifacts" / "latest.md")

    def run_page(page, configuration):
        return PageRun(
            page, tmp_path / "scratch", printed={b.lineno: "other\n" for b in page.cells}
        )

    monkeypatch.setattr(latest, "run_page", run_page)
    assert latest.main([str(page.path)]) == 0
    written = (tmp_path / "artifacts" / "latest.md").read_text()
    assert written == capsys.readouterr().out
    assert f"| {page.cells[1].where} | shown `done`, printed `other` |" in written
    assert latest.main([str(tmp_path / "missing.md")]) != 0


def test_the_makefile_upgrades_the_packages_the_report_names():
    makefile = (REPO_ROOT / "Makefile").read_text()
    (names,) = re.findall(r"^LATEST_PACKAGES := (.*)$", makefile, re.M)
    assert tuple(names.split()) == latest.PACKAGES
