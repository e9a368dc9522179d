"""tools/exercises.py: a chapter's exercises are read from its page, a missing part is
named by file and line, a check shows one line and folds how it works, each solution and
mistake runs after the page followed by its check, the notebook folds them away, and
every chapter of every part has at least two exercises."""

import textwrap

import pytest

from snippets.book import nav, parts
from tools.execute import run_page
from tools.exercises import exercises, listing, problems
from tools.notebooks import to_notebook
from tools.pages import DOCS, parse

CHECKER = (DOCS.parent / "snippets" / "exercises.py").read_text()
START, END = "# --8<-- [start:check]\n", "# --8<-- [end:check]"
CHECKER = CHECKER[CHECKER.index(START) + len(START) : CHECKER.index(END)].rstrip()

EXERCISE = """
    ### Core: Doubling

    <!--pytest-codeblocks:cont-->
    ```python
    def double(x):
        raise NotImplementedError  # your code here
    ```

    ??? example "How this check works"

        <!--pytest-codeblocks:cont-->
        ```python
        check_double = checker(lambda x: 2 * x, [(torch.ones(3),), (torch.arange(4.0),)],
            against="2 * x", mistakes={"the square, not the double": lambda x: x * x})
        ```

    <!--pytest-codeblocks:cont-->
    ```python
    check_double(double)
    ```

    <!--pytest-codeblocks:expected-output-->
    ```text
    ✗ double is not written yet: it raises NotImplementedError
    ```

    ??? success "Solution"

        <!--pytest-codeblocks:cont-->
        <!--pytest.mark.skip(reason="the solution")-->
        ```python
        def double(x):
            return x + x
        ```

    ??? failure "A classic mistake: squaring"

        <!--pytest-codeblocks:cont-->
        <!--pytest.mark.skip(reason="a classic mistake; its hint names 'the square'")-->
        ```python
        def double(x):
            return x**2
        ```
"""


def chapter(tmp_path, exercise=EXERCISE):
    checker = textwrap.indent(CHECKER, "        ")
    path = tmp_path / "chapter.md"
    path.write_text(
        textwrap.dedent(
            f"""
    # A chapter

    ```python
    import torch
    ```

    ## Exercises

    ??? example "The checker"

        <!--pytest-codeblocks:cont-->
        ```python
{checker}
        ```
"""
            + exercise
        ).lstrip()
    )
    return parse(path)


def test_an_exercise_is_read_with_its_parts(tmp_path):
    page = chapter(tmp_path)
    [exercise] = exercises(page)
    assert (exercise.difficulty, exercise.title, exercise.anchor) == (
        "Core",
        "Doubling",
        "core-doubling",
    )
    assert "def double" in exercise.starter.code and exercise.check.code == "check_double(double)\n"
    assert [block.code.splitlines()[0] for block in exercise.machinery] == [
        "check_double = checker(lambda x: 2 * x, [(torch.ones(3),), (torch.arange(4.0),)],"
    ]
    assert "x + x" in exercise.solution.code
    assert [(words, "x**2" in block.code) for words, block in exercise.mistakes] == [
        ("the square", True)
    ]
    assert problems(page) == [] and page.problems == []


@pytest.mark.parametrize(
    ("removed", "missing"),
    [
        ('    ??? success "Solution"', "no a solution"),
        ("a classic mistake; its hint names 'the square'", "no a classic mistake"),
    ],
)
def test_a_missing_part_is_named_with_file_and_line(tmp_path, removed, missing):
    broken = EXERCISE.replace(removed, "" if removed.startswith(" ") else "a note")
    if missing == "no a solution":  # the solution's block, out of its box, is a mistake's
        broken = broken.replace('reason="the solution"', 'reason="no longer the solution"')
    page = chapter(tmp_path, broken)
    [problem] = problems(page)
    assert problem.startswith(f"{page.path}:") or "chapter.md:" in problem
    assert missing in problem


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (('    ??? example "How this check works"\n', ""), "goes in a box"),
        (("    check_double(double)\n", "    check_double(\n        double)\n"), "is one line"),
        (
            (
                "    <!--pytest-codeblocks:cont-->\n    ```python\n    check_double(double)",
                "    <!--pytest-codeblocks:cont-->\n    ```python\n    x = 1\n    ```\n\n"
                "    <!--pytest-codeblocks:cont-->\n    ```python\n    check_double(double)",
            ),
            "outside the box",
        ),
    ],
)
def test_a_check_shows_one_line_and_folds_how_it_works(tmp_path, change, problem):
    page = chapter(tmp_path, EXERCISE.replace(*change))
    [found] = problems(page)
    assert "chapter.md:" in found and problem in found


def test_a_second_solution_is_named(tmp_path):
    start, end = EXERCISE.index('    ??? success "Solution"'), EXERCISE.index("    ??? failure")
    solution = EXERCISE[start:end]
    page = chapter(tmp_path, EXERCISE + "\n" + solution)
    [problem] = problems(page)
    assert "chapter.md:" in problem and "a second solution" in problem


def test_each_solution_and_mistake_runs_after_the_page_followed_by_its_check(tmp_path):
    page = chapter(tmp_path)
    [exercise] = exercises(page)
    run = run_page(page)
    assert run.printed[exercise.check.lineno] == (
        "✗ double is not written yet: it raises NotImplementedError\n"
    )
    assert run.verdicts[exercise.lineno, "the solution"] == "✓ double equals 2 * x on 2 inputs\n"
    mistake = run.verdicts[exercise.lineno, "the mistake 'the square'"]
    assert mistake.startswith("✗ double differs from 2 * x on input 1 of 2: (3,)")
    assert "You computed the square, not the double." in mistake


def test_a_solution_that_raises_before_the_check_gets_a_verdict_that_says_why(tmp_path):
    page = chapter(tmp_path, EXERCISE.replace("return x + x", "return x + x\n        1 / 0"))
    [exercise] = exercises(page)
    verdict = run_page(page).verdicts[exercise.lineno, "the solution"]
    assert verdict.startswith("(it raised ZeroDivisionError: division by zero)")


def test_the_notebook_folds_the_solution_and_the_mistakes(tmp_path):
    cells = to_notebook(chapter(tmp_path), None).cells
    folded = [c.source for c in cells if c.cell_type == "markdown" and "<details>" in c.source]
    assert len(folded) == 1
    assert "<summary>Solution</summary>" in folded[0] and "return x + x" in folded[0]
    assert "<summary>A classic mistake: squaring</summary>" in folded[0]
    assert folded[0].count("</details>") == 2 and "pytest" not in folded[0]
    assert not any("return x + x" in c.source for c in cells if c.cell_type == "code")


def test_the_notebook_hides_the_code_of_how_the_check_works(tmp_path):
    cells = to_notebook(chapter(tmp_path), None).cells
    hidden = [c.source.split("\n")[0] for c in cells if c.metadata.get("jupyter")]
    assert hidden == [
        "import copy",
        "check_double = checker(lambda x: 2 * x, [(torch.ones(3),), (torch.arange(4.0),)],",
    ]
    assert all(
        c.metadata["jupyter"] == {"source_hidden": True} and c.metadata["cellView"] == "form"
        for c in cells
        if c.metadata.get("jupyter")
    )


def test_the_notebook_keeps_the_blank_lines_of_code_in_a_box(tmp_path):
    # pytest-codeblocks drops them, and so does the code the tests run; the reader's keeps them
    separated = "    inputs = [(torch.ones(3),)]\n\n\n        check_double = checker("
    page = chapter(tmp_path, EXERCISE.replace("    check_double = checker(", separated))
    [hidden] = [c.source for c in to_notebook(page, None).cells if c.metadata.get("jupyter")][1:]
    assert hidden.startswith("inputs = [(torch.ones(3),)]\n\n\ncheck_double = checker(")
    assert page.cells[-2].code.startswith("inputs = [(torch.ones(3),)]\ncheck_double = ")


def test_a_box_a_code_cell_cuts_stays_a_quote(tmp_path):
    path = tmp_path / "boxed.md"
    path.write_text(
        '```python\nx = 1\n```\n\n??? example "Earlier code"\n\n    Its functions:\n\n'
        "    <!--pytest-codeblocks:cont-->\n    ```python\n    y = x\n    ```\n"
    )
    cells = to_notebook(parse(path), None).cells
    assert "> **Earlier code**" in cells[3].source and "<details>" not in cells[3].source


def test_every_chapter_of_every_part_has_two_exercises():
    short = {
        page: len(exercises(parse(DOCS / page)))
        for _, chapters in parts()
        for _, page in chapters
        if len(exercises(parse(DOCS / page))) < 2
    }
    assert parts() and not short, f"chapters with fewer than two exercises: {short}"


def test_the_exercises_page_links_every_exercise():
    text = listing()
    for _, chapters in nav():
        for _, path in chapters:
            if path.endswith(".md"):
                for exercise in exercises(parse(DOCS / path)):
                    assert f"]({path}#{exercise.anchor})" in text
