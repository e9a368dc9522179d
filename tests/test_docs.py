"""Every page of the book: its conventions, then each of its blocks, in page order."""

import shutil

import pytest

from tests import docs_runner

PAGES = [docs_runner.parse(path) for path in docs_runner.pages()]
BLOCKS = [(page, block) for page in PAGES for block in page.blocks]


@pytest.fixture(scope="module", autouse=True)
def _remove_scratch_folders():
    yield
    for page in PAGES:
        if page.workdir is not None:
            shutil.rmtree(page.workdir, ignore_errors=True)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: docs_runner.display(page.path))
def test_page_follows_conventions(page):
    if page.problems:
        pytest.fail("\n".join(page.problems), pytrace=False)


@pytest.mark.parametrize(("page", "block"), BLOCKS, ids=[block.where for _, block in BLOCKS])
def test_block(page, block):
    outcome = "failed"
    try:
        docs_runner.run(block, page)
        outcome = "executed"
    except pytest.skip.Exception:
        outcome = "skipped"
        raise
    except docs_runner.BlockFailure as failure:
        pytest.fail(str(failure), pytrace=False)
    finally:
        docs_runner.TALLY[outcome] += 1
