"""Every page of the book: its conventions, links and images, then each of its blocks,
in page order.

Each page runs once, as the notebook a reader downloads, in a fresh kernel
(tools/execute.py); each block is then its own test, passing, failing with the
page's file:line and traceback, or skipped. A page whose blocks all pass records
its run time, which the site prints under its title.
"""

import shutil

import pytest

from tests.conftest import TALLY, selected_pages
from tools import checks, timings
from tools.execute import BlockFailure, BlockSkipped, run_page
from tools.pages import FIGURES, display, pages, parse

RUNS = {}  # page path -> its PageRun, made by the first of its blocks to be tested


def pytest_generate_tests(metafunc):
    chosen = [parse(path) for path in selected_pages(metafunc.config) or pages()]
    if "block" in metafunc.fixturenames:
        blocks = [(page, block) for page in chosen for block in page.blocks]
        metafunc.parametrize(("page", "block"), blocks, ids=[b.where for _, b in blocks])
    elif "page" in metafunc.fixturenames:
        metafunc.parametrize("page", chosen, ids=[display(page.path) for page in chosen])


@pytest.fixture(scope="module", autouse=True)
def _remove_scratch_folders():
    yield
    for run in RUNS.values():
        shutil.rmtree(run.workdir, ignore_errors=True)


def test_page_follows_conventions(page):
    problems = page.problems + checks.nav_problems(page.path) + checks.link_problems(page.path)
    problems += checks.image_problems(page.path, FIGURES)
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def test_block(page, block):
    if page.path not in RUNS:
        RUNS[page.path] = run = run_page(page)
        if page.cells and run.passed:
            timings.record(page.path, run.seconds)
    outcome = "failed"
    try:
        RUNS[page.path].check(block)
        outcome = "executed"
    except BlockSkipped as skipped:
        outcome = "skipped"
        pytest.skip(str(skipped))
    except BlockFailure as failure:
        pytest.fail(str(failure), pytrace=False)
    finally:
        TALLY[outcome] += 1
