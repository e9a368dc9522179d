"""Every page of the book: its conventions, links and images, then each of its blocks,
in page order.

Each page runs once per numeric configuration (tools/numerics.py; the
machine as it is, unless `--configuration` or `--page` asks for more), as the notebook a
reader downloads, in a fresh kernel; each block is then its own test, passing, failing
with the page's file:line, the configuration and the first differing line or the
traceback, or skipped. A page whose blocks all pass as they are records its run time,
which the site prints under its title.
"""

import shutil
from pathlib import Path

import pytest

from tests.conftest import selected_configurations, selected_pages
from tools import checks, timings
from tools.execute import BlockFailure, BlockSkipped, run_page
from tools.exercises import exercises, is_variant
from tools.exercises import problems as exercise_problems
from tools.numerics import describe
from tools.pages import FIGURES, display, pages, parse

RUNS = {}  # (page path, configuration) -> its PageRun, made by its first block tested


def pytest_generate_tests(metafunc):
    chosen = [parse(path) for path in selected_pages(metafunc.config) or pages()]
    if "block" in metafunc.fixturenames:
        # one group per page and configuration, so that pytest-xdist runs its blocks in one
        # worker, after one run of the page
        blocks = [
            pytest.param(page, block, configuration, id=f"{block.where}[{configuration}]",
                         marks=pytest.mark.xdist_group(block_group(page.path, configuration)))
            for configuration in selected_configurations(metafunc.config)
            for page in chosen
            for block in page.blocks
            if not is_variant(block)  # test_exercise runs it
        ]  # fmt: skip
        metafunc.parametrize(("page", "block", "configuration"), blocks)
    elif "exercise" in metafunc.fixturenames:
        metafunc.parametrize(("page", "exercise", "configuration"), [
            pytest.param(page, exercise, configuration, id=f"{exercise.where}[{configuration}]",
                         marks=pytest.mark.xdist_group(block_group(page.path, configuration)))
            for configuration in selected_configurations(metafunc.config)
            for page in chosen
            for exercise in exercises(page)
        ])  # fmt: skip
    elif "page" in metafunc.fixturenames:
        metafunc.parametrize("page", chosen, ids=[display(page.path) for page in chosen])


def block_group(page: Path, configuration: str) -> str:
    """The pytest-xdist group of a page's blocks under a configuration. No "]" in it: the
    scheduler reads a group after a nodeid's last "@" only when no "]" follows it."""
    return f"{display(page)} {configuration}"


@pytest.fixture(scope="module", autouse=True)
def _remove_scratch_folders():
    yield
    for run in RUNS.values():
        shutil.rmtree(run.workdir, ignore_errors=True)


def page_run(page, configuration):
    """The page's one run under a configuration, shared by its blocks and exercises."""
    if (page.path, configuration) not in RUNS:
        RUNS[page.path, configuration] = run = run_page(page, configuration)
        if page.cells and run.passed and configuration == "as-is":
            timings.record(page.path, run.seconds)
    return RUNS[page.path, configuration]


def test_page_follows_conventions(page):
    problems = page.problems + checks.nav_problems(page.path) + checks.link_problems(page.path)
    problems += exercise_problems(page)
    problems += checks.image_problems(page.path, FIGURES)
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def test_block(page, block, configuration):
    try:
        page_run(page, configuration).check(block)
    except BlockSkipped as skipped:
        pytest.skip(str(skipped))
    except BlockFailure as failure:
        problem = str(failure)
    else:
        return
    pytest.fail(problem, pytrace=False)


def test_exercise(page, exercise, configuration):
    """The check fails the starter (the verdict the page shows) and each classic mistake,
    naming it, and passes the solution."""
    run = page_run(page, configuration)
    if exercise.check.lineno not in run.printed:
        pytest.skip(f"{exercise.where}: the page did not run to its check")
    problems = []
    if not run.printed[exercise.check.lineno].startswith("✗"):
        problems.append(f"{exercise.check.where}: the check does not fail the starter")
    for label, block, words in exercise.variants():
        verdict = run.verdicts.get((exercise.lineno, label), "")
        passed = verdict.startswith("✗") and words in verdict if words else verdict.startswith("✓")
        if not passed:
            problems.append(
                f"{block.where}: with {label} in place of the starter, the check printed:\n"
                f"{verdict or '(nothing)'}"
            )
    if problems:
        pytest.fail("\n".join(problems) + f"\nunder {describe(configuration)}", pytrace=False)
