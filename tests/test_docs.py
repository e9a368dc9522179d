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

from snippets.book import cpu_name
from tests.plugins.report import NARROW_MARGIN, OVER_BUDGET
from tests.plugins.selection import selected_configurations, selected_pages
from tools import checks, formatting, timings
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
            pytest.param(
                page,
                block,
                configuration,
                id=f"{block.where}[{configuration}]",
                marks=pytest.mark.xdist_group(block_group(page.path, configuration)),
            )
            for configuration in selected_configurations(metafunc.config)
            for page in chosen
            for block in page.blocks
            if not is_variant(block)  # test_exercise runs it
        ]
        metafunc.parametrize(("page", "block", "configuration"), blocks)
    elif "exercise" in metafunc.fixturenames:
        metafunc.parametrize(
            ("page", "exercise", "configuration"),
            [
                pytest.param(
                    page,
                    exercise,
                    configuration,
                    id=f"{exercise.where}[{configuration}]",
                    marks=pytest.mark.xdist_group(block_group(page.path, configuration)),
                )
                for configuration in selected_configurations(metafunc.config)
                for page in chosen
                for exercise in exercises(page)
            ],
        )
    elif "configuration" in metafunc.fixturenames:  # the budget: as-is only
        metafunc.parametrize(
            ("page", "configuration"),
            [
                pytest.param(
                    page,
                    "as-is",
                    id=display(page.path),
                    marks=pytest.mark.xdist_group(block_group(page.path, "as-is")),
                )
                for page in chosen
                if page.cells and "as-is" in selected_configurations(metafunc.config)
            ],
        )
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
            timings.record(page.path, run.seconds, run.cpu_seconds)
    return RUNS[page.path, configuration]


def test_page_follows_conventions(page):
    problems = page.problems + checks.nav_problems(page.path) + checks.link_problems(page.path)
    problems += checks.front_matter_problems(page.path) + formatting.problems(page.path)
    problems += exercise_problems(page)
    problems += checks.image_problems(page.path, FIGURES)
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def test_block(request, page, block, configuration):
    run = page_run(page, configuration)
    for narrow in run.narrow_margins.get(block.lineno, []):
        request.node.user_properties.append(
            (NARROW_MARGIN, f"{narrow}, under {describe(configuration)} on {cpu_name()}")
        )
    try:
        run.check(block)
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
    for hint, verdict in run.named_verdicts.get(exercise.lineno, {}).items():
        if not (verdict.startswith("✗") and f"You computed {hint}." in verdict):
            problems.append(
                f"{exercise.machinery[0].where}: the checker's mistake '{hint}', checked in "
                f"place of the reader's function, printed:\n{verdict or '(nothing)'}\n"
                "Each mistake a checker knows must fail with its own hint: add an input on "
                "which it differs from the reference and from the mistakes named before it."
            )
    if problems:
        pytest.fail("\n".join(problems) + f"\nunder {describe(configuration)}", pytrace=False)


def test_page_within_budget(request, page, configuration):
    """The page's kernel, as-is, uses at most its budget of CPU seconds (tools/timings.py);
    over it the run's summary warns, and only past twice it does this test fail, so that a
    busy machine does not fail it. The one test that compares a time."""
    run = page_run(page, configuration)
    if not run.passed:
        pytest.skip(f"{display(page.path)}: the page did not pass, so its cost is not its own")
    budget = timings.budget(page.path)
    cost = (
        f"{display(page.path)}: {run.cpu_seconds:.1f} CPU seconds ({run.seconds:.1f} s of "
        f"wall time), over its budget of {budget:g} (tools/timings.py)"
    )
    if run.cpu_seconds > budget:
        request.node.user_properties.append((OVER_BUDGET, cost))
    if run.cpu_seconds > 2 * budget:
        pytest.fail(
            f"{cost} by more than twice: make it cheaper, or write its budget beside its name "
            "in tools/timings.py, with the reason (docs/contributing.md)",
            pytrace=False,
        )
