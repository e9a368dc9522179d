"""A chapter's exercises, read from its page.

A chapter ends with a section "## Exercises". It runs the checker first
(`--8<-- "exercises.py:check"`), then holds one exercise per heading
"### Warm-up: ...", "### Core: ..." or "### Stretch: ...", made of:

- the starter: the first python block, the function to write, which raises
  NotImplementedError until the reader writes it;
- how its check works, in a collapsed box (`??? example "How this check works"`): the
  python blocks that draw the inputs and make the check with `checker(...)`;
- the check: the first python block with an expected output, one line that calls the
  check on the reader's function; its expected output is the verdict on the starter;
- the solution, in a collapsed box: a block skipped with the reason "the solution";
- one classic mistake or more, each in a collapsed box: a block skipped with the reason
  "a classic mistake; its hint names '...'", the words the check's verdict must say.

The page's run (tools/execute.py) runs each solution and each mistake after the page,
followed by its check's blocks, and the tests (tests/test_docs.py) read the verdicts. Every
problem found names the page, the line and the cause.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from markdown.extensions.toc import slugify

from snippets.book import nav
from tools.pages import DOCS, Block, Page, display, parse

MARKER = "<!-- the exercise list -->"  # where docs/exercises.md lists them
SECTION = "## Exercises"
HEADING = re.compile(r"^### (Warm-up|Core|Stretch): (.+?)\s*$")
DIFFICULTIES = ("Warm-up", "Core", "Stretch")
MACHINERY = '??? example "How this check works"'
SOLUTION = "the solution"
MISTAKE = re.compile(r"^a classic mistake; its hint names '(.+)'$")


@dataclass
class Exercise:
    page: Path
    lineno: int  # the line of its heading
    difficulty: str  # Warm-up, Core or Stretch
    title: str
    starter: Block | None = None
    machinery: list[Block] = field(default_factory=list)  # how the check works, folded
    check: Block | None = None  # the one-line call, with the verdict on the starter
    solution: Block | None = None
    mistakes: list[tuple[str, Block]] = field(default_factory=list)  # (hint's words, block)
    second_solutions: list[Block] = field(default_factory=list)  # a problem: one only

    @property
    def anchor(self) -> str:
        """The heading's id on the site (Python-Markdown's toc, as mkdocs.yml configures it)."""
        return slugify(f"{self.difficulty}: {self.title}", "-")

    @property
    def where(self) -> str:
        return f"{display(self.page)}:{self.lineno}"

    @property
    def check_code(self) -> str:
        """What runs after a solution or a mistake: the check's blocks, machinery first."""
        return "\n".join(block.code for block in [*self.machinery, self.check])

    @property
    def checkers(self) -> list[str]:
        """The names the machinery binds to a `checker(...)`, as in `check_x = checker(...)`."""
        names = []
        for block in self.machinery:
            try:
                tree = ast.parse(block.code)
            except SyntaxError:  # the page's own test says where
                continue
            names += [
                target.id
                for node in ast.walk(tree)
                if isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and getattr(node.value.func, "id", None) == "checker"
                for target in node.targets
                if isinstance(target, ast.Name)
            ]
        return names

    def variants(self) -> list[tuple[str, Block, str]]:
        """What the tests run in place of the starter, each followed by the check: the
        solution, then the mistakes, as (what it is, its block, the words its hint must
        print; "" for the solution)."""
        solution = [("the solution", self.solution, "")] if self.solution else []
        return solution + [
            (f"the mistake '{words}'", block, words) for words, block in self.mistakes
        ]


def exercises(page: Page) -> list[Exercise]:
    """The page's exercises, in page order; [] if it has no Exercises section."""
    lines = page.path.read_text(encoding="utf-8").splitlines()
    found: list[Exercise] = []
    in_section = False
    for lineno, line in enumerate(lines, 1):
        if line.startswith("## "):
            in_section = line.strip() == SECTION
        elif in_section and (heading := HEADING.match(line)):
            found.append(Exercise(page.path, lineno, heading.group(1), heading.group(2)))
    ends = [following.lineno for following in found[1:]] + [len(lines) + 1] * bool(found)
    for exercise, end in zip(found, ends, strict=True):
        for block in page.blocks:
            if exercise.lineno < block.lineno < end and block.syntax == "python":
                _place(exercise, block)
    return found


def is_variant(block: Block) -> bool:
    """A solution's or a classic mistake's block: skipped on the page, run by the tests in
    place of its exercise's starter."""
    reason = block.skip_reason or ""
    return reason == SOLUTION or MISTAKE.match(reason) is not None


def _place(exercise: Exercise, block: Block) -> None:
    if block.skip_reason is None:
        if exercise.starter is None:
            exercise.starter = block
        elif exercise.check is None and block.expected_output is None:
            exercise.machinery.append(block)
        elif exercise.check is None:
            exercise.check = block
    elif block.skip_reason == SOLUTION:
        if exercise.solution is None:
            exercise.solution = block
        else:
            exercise.second_solutions.append(block)
    elif mistake := MISTAKE.match(block.skip_reason):
        exercise.mistakes.append((mistake.group(1), block))


def problems(page: Page) -> list[str]:
    """What is missing or misplaced in the page's exercises, each with file and line."""
    text = page.path.read_text(encoding="utf-8")
    lines = [line.strip() for line in text.splitlines()]
    found = exercises(page)
    result = []
    if SECTION in text.splitlines() and not found:
        result.append(
            f"{display(page.path)}: an Exercises section with no exercise. Each starts with a "
            f"heading '### {' / '.join(DIFFICULTIES)}: what to write'."
        )
    for exercise in found:
        parts = {
            "a starter (a python block that runs)": exercise.starter,
            "a check (the next python block with an expected output)": exercise.check,
            f'a solution (a block skipped with reason="{SOLUTION}")': exercise.solution,
            'a classic mistake (a block skipped with reason="a classic mistake; its hint '
            "names '...'\")": exercise.mistakes,
        }
        missing = [what for what, present in parts.items() if not present]
        result += [
            f"{block.where}: a second solution; the tests run the first only. Keep one."
            for block in exercise.second_solutions
        ]
        if missing:
            result.append(f"{exercise.where}: the exercise has no {', no '.join(missing)}.")
        elif len(exercise.check.code.strip().splitlines()) != 1 or not exercise.machinery:
            result.append(
                f"{exercise.check.where}: an exercise's check is one line, which calls the "
                "check on the reader's function; the reference, the inputs and the mistakes "
                f"go above it, in a box '{MACHINERY}'."
            )
        elif MACHINERY not in lines[(first := exercise.machinery[0].lineno) - 4 : first]:
            result.append(
                f"{exercise.machinery[0].where}: the code that makes the check goes in a box "
                f"'{MACHINERY}', its block first in the box."
            )
        else:  # the box's other blocks: no line of the page between them is outside it
            raw = text.splitlines()
            result += [
                f"{block.where}: a block between '{MACHINERY}' and the check, outside the box: "
                "indent it into the box, or move it above the exercise."
                for block in exercise.machinery[1:]
                if any(line and not line.startswith(" ") for line in raw[first : block.lineno])
            ]
    return result


def listing() -> str:
    """Every exercise of the book, by part and chapter in the nav's order, each linked to
    its place, with its difficulty, after a count: the Markdown that replaces MARKER."""
    out, counts, chapters_with = [], dict.fromkeys(DIFFICULTIES, 0), 0
    for part, chapters in nav():
        rows = []
        for title, path in chapters:
            found = exercises(parse(DOCS / path)) if path.endswith(".md") else []
            chapters_with += bool(found)
            for number, exercise in enumerate(found):
                counts[exercise.difficulty] += 1
                rows.append(
                    f"| {f'[{title}]({path})' if number == 0 else ''} "
                    f"| [{exercise.title}]({path}#{exercise.anchor}) | {exercise.difficulty} |"
                )
        if rows:
            out += [f"## {part}", "", "| chapter | exercise | difficulty |", "|---|---|---|"]
            out += [*rows, ""]
    total = ", ".join(f"{n} {d.lower()}" for d, n in counts.items())
    summary = f"{sum(counts.values())} exercises in {chapters_with} chapters: {total}."
    return "\n".join([summary, "", *out])
