"""Reading a page (tools/pages.py) and running it (tools/execute.py) tell a contributor
what is wrong: file, line and cause. And the fences are read as pytest-codeblocks reads
them, on every page of the book."""

import io
import re
import textwrap

import pytest
from pytest_codeblocks.main import extract_from_buffer

from tools.execute import BlockFailure, BlockSkipped, run_page
from tools.pages import pages, parse, read_fences


def page_from(tmp_path, markdown, name="chapter.md"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(markdown).lstrip())
    return parse(path)


def run_all(page):
    run = run_page(page)
    return [run.check(block) for block in page.blocks]


@pytest.mark.parametrize("path", pages(), ids=lambda p: p.name)
def test_fences_are_read_as_pytest_codeblocks_reads_them(path):
    text = path.read_text(encoding="utf-8")
    # pytest-codeblocks glues a block after a cont marker onto the one before; here each
    # block is its own test, so compare with the markers blanked, as lines
    cont = re.compile(r"^\s*<!--[-\s]*pytest-codeblocks:\s*cont[-\s]*-->\s*$")
    blanked = "".join("\n" if cont.match(line) else line for line in text.splitlines(True))
    theirs = extract_from_buffer(io.StringIO(blanked))
    ours = read_fences(text)
    assert [(f.lineno, f.syntax, f.code, f.expected_output, f.marks) for f in ours] == [
        (b.lineno, b.syntax, b.code, b.expected_output, b.marks) for b in theirs
    ]


@pytest.mark.parametrize("info", ["py", 'python title="x.py"', 'python linenums="1"', "pycon"])
def test_a_fence_that_would_be_silently_skipped_is_reported(tmp_path, info):
    page = page_from(tmp_path, f"# T\n\n```{info}\nprint(1)\n```\n")
    [problem] = page.problems
    assert "chapter.md:3:" in problem
    assert "is never run" in problem and "plain ```python fence" in problem


def test_blocks_not_chained_into_one_session_are_reported(tmp_path):
    page = page_from(
        tmp_path,
        """
        ```python
        x = 1
        ```

        Prose.

        ```python
        y = x
        ```
        """,
    )
    [problem] = page.problems
    assert "chapter.md:7:" in problem and "not chained" in problem
    assert "<!--pytest-codeblocks:cont-->" in problem


def test_a_skip_needs_a_reason(tmp_path):
    page = page_from(tmp_path, "<!--pytest.mark.skip-->\n```python\nraise SystemExit\n```\n")
    [problem] = page.problems
    assert "chapter.md:2:" in problem and "gives no reason" in problem
    assert page.blocks[0].skip_reason  # still skipped, never run
    with pytest.raises(BlockSkipped):
        run_page(page).check(page.blocks[0])


def test_a_failing_block_names_page_line_exception_and_traceback(tmp_path):
    page = page_from(
        tmp_path,
        """
        ```python
        def divide(a, b):
            return a / b
        ```

        <!--pytest-codeblocks:cont-->
        ```python
        print("about to fail")
        divide(1, 0)
        ```
        """,
    )
    assert page.problems == []
    run = run_page(page)
    run.check(page.blocks[0])
    with pytest.raises(BlockFailure) as failure:
        run.check(page.blocks[1])
    message = str(failure.value)
    assert message.splitlines()[0].endswith("chapter.md:9: ZeroDivisionError: division by zero")
    assert "chapter.md:7)" in message.splitlines()[1]
    assert 'chapter.md", line 9, in <module>' in message
    assert 'chapter.md", line 3, in divide' in message and "return a / b" in message
    assert "about to fail" in message


def test_an_output_that_differs_from_the_page_is_shown_as_a_diff(tmp_path):
    page = page_from(
        tmp_path,
        """
        ```python
        print(6 * 7)
        ```

        <!--pytest-codeblocks:expected-output-->
        ```text
        41
        ```
        """,
    )
    with pytest.raises(BlockFailure) as failure:
        run_all(page)
    message = str(failure.value)
    assert "chapter.md:1: under as-is (the machine as it is), the block's output differs" in message
    assert "from its line 1 on\n  shown:   41\n  printed: 42" in message
    assert "-41" in message and "+42" in message and "chapter.md:5" in message


def test_output_the_page_does_not_show_fails(tmp_path):
    page = page_from(tmp_path, "```python\nprint('hidden')\n```\n")
    with pytest.raises(BlockFailure, match="prints output that the page does not"):
        run_all(page)


def test_later_blocks_are_skipped_after_a_failure(tmp_path):
    page = page_from(
        tmp_path,
        "```python\nraise ValueError('x')\n```\n\n<!--pytest-codeblocks:cont-->\n"
        "```python\nprint(1)\n```\n",
    )
    run = run_page(page)
    with pytest.raises(BlockFailure):
        run.check(page.blocks[0])
    with pytest.raises(BlockSkipped, match="an earlier block of this page failed"):
        run.check(page.blocks[1])


def test_includes_are_expanded_and_tracebacks_point_into_snippets(tmp_path):
    page = page_from(
        tmp_path,
        """
        ```python
        --8<-- "wordpiece.py:wordpiece"

        print(wordpiece("unaffable", {"un": 0, "##aff": 1, "##able": 2}))
        wordpiece(None, {})
        ```
        """,
    )
    block = page.blocks[0]
    assert "def wordpiece(" in block.code and "--8<--" not in block.code
    with pytest.raises(BlockFailure) as failure:
        run_page(page).check(block)
    message = str(failure.value)
    assert message.splitlines()[0].endswith(
        "chapter.md:5: TypeError: object of type 'NoneType' has no len()"
    )
    assert 'File "snippets/wordpiece.py", line' in message
    assert "['un', '##aff', '##able']" in message  # printed before failing


def test_a_missing_include_is_reported(tmp_path):
    page = page_from(tmp_path, '```python\n--8<-- "no_such_module.py:part"\n```\n')
    [problem] = page.problems
    assert "chapter.md:2:" in problem and "no_such_module.py" in problem


def test_what_a_page_changes_stays_in_that_page(tmp_path):
    """Each page runs in a kernel of its own: settings and names do not leak to the next."""
    first = page_from(
        tmp_path,
        """
        ```python
        import torch

        torch.set_grad_enabled(False)
        torch.set_default_dtype(torch.float64)
        leaked = 1
        ```
        """,
        name="first.md",
    )
    second = page_from(
        tmp_path,
        """
        ```python
        import torch

        assert torch.is_grad_enabled() and torch.get_default_dtype() == torch.float32
        assert "leaked" not in globals()
        ```
        """,
        name="second.md",
    )
    run_all(first)
    run_all(second)


def test_a_page_runs_in_an_empty_scratch_folder(tmp_path):
    page = page_from(tmp_path, "```python\nimport os\n\nassert os.listdir() == []\n```\n")
    run_all(page)


def test_a_code_line_too_wide_for_the_page_is_reported(tmp_path):
    wide = "x = " + " + ".join(["1"] * 30)  # 121 characters
    page = page_from(tmp_path, f"# T\n\n```python\nshort = 1\n{wide}\n```\n")
    [problem] = page.problems
    assert "chapter.md:5:" in problem and "121 characters" in problem
    assert "ruff format" in problem


def test_an_output_line_too_wide_for_the_page_is_reported(tmp_path):
    marker = "<!--pytest-codeblocks:expected-output-->"
    output = "x" * 101
    page = page_from(
        tmp_path, f"# T\n\n```python\nprint('x' * 101)\n```\n\n{marker}\n```text\n{output}\n```\n"
    )
    [problem] = page.problems
    assert "chapter.md:9:" in problem and "an output line of 101 characters" in problem


def test_a_blank_line_in_an_indented_output_is_reported():
    text = '!!! note "N"\n    ```python\n    print("a\\n\\nb")\n    ```\n\n'
    text += "    <!--pytest-codeblocks:expected-output-->\n    ```text\n    a\n\n    b\n    ```\n"
    with pytest.raises(ValueError, match="line 7: an expected output indented under a box"):
        read_fences(text)


def test_three_blank_lines_in_a_code_block_are_reported(tmp_path):
    page = page_from(tmp_path, "# T\n\n```python\nx = 1\n\n\n\ny = 2\n\n\nz = 3\n```\n")
    [problem] = page.problems
    assert "chapter.md:7: three blank lines in a row" in problem


def test_included_sections_bring_no_blank_lines_at_their_ends(tmp_path):
    """A section ends with the two blank lines ruff leaves after a function, and holds
    the markers of the sections inside it, which are dropped: neither shows as a run of
    more than two blank lines on the page."""
    page = page_from(
        tmp_path,
        """
        ```python
        --8<-- "decoding.py:processors"


        print(apply_temperature)
        ```
        """,
    )
    [block] = page.blocks
    assert not page.problems
    assert "def keep_top_p" in block.code and "[start:top_p]" not in block.code
    assert "\n\n\n\n" not in block.code
    assert 'return scores.index_fill(-1, banned, float("-inf"))\n\n\nprint(' in block.code
    assert all("\n\n\n\n" not in b.code for path in pages() for b in parse(path).blocks)


def test_a_page_importing_the_books_own_code_is_reported(tmp_path):
    """The book's environment has snippets/ installed; a reader's Python does not."""
    page = page_from(
        tmp_path, "# T\n\n```python\nimport torch\n\nfrom snippets.book import read_json\n```\n"
    )
    [problem] = page.problems
    assert "chapter.md:6: `import snippets.book`" in problem
    assert "--8<--" in problem
