"""The run's summary: how the book's blocks fared, the comparisons that passed with a
narrow margin, the pages over budget, and with --page, the test files that ran. Each
reaches this process in the reports, from every pytest-xdist worker."""

from collections import Counter
from pathlib import Path

from tests.plugins.selection import selected_pages, tests_of
from tools.numerics import MARGIN
from tools.pages import display

# outcomes of the book's own blocks ("passed", "skipped", "failed")
TALLY: Counter[str] = Counter()
# comparisons that passed with less than MARGIN to spare, above the floor of a machine whose
# kernels no named configuration reaches (tools/numerics.py): each test attaches them to its
# report as a "narrow margin" property
NARROW_MARGIN = "narrow margin"
# pages that used more CPU seconds than their budget, less than twice it (tools/timings.py)
OVER_BUDGET = "over budget"
REPORTED: dict[str, list[str]] = {NARROW_MARGIN: [], OVER_BUDGET: []}
TESTS = Path(__file__).parents[1]


def pytest_runtest_logreport(report):
    if "test_docs.py::test_block" in report.nodeid and (
        report.when == "call" or report.outcome != "passed"
    ):
        TALLY[report.outcome] += 1
    if report.when == "call":
        for name, value in report.user_properties:
            REPORTED.get(name, []).append(value)


def pytest_terminal_summary(terminalreporter, config):
    if TALLY:
        terminalreporter.write_sep(
            "-",
            f"docs: {TALLY['passed']} blocks ran and passed, {TALLY['skipped']} skipped, "
            f"{TALLY['failed']} failed",
        )
    narrow, over = REPORTED[NARROW_MARGIN], REPORTED[OVER_BUDGET]
    if narrow:
        terminalreporter.write_sep(
            "-",
            f"{len(narrow)} comparison{'s' * (len(narrow) > 1)} passed with less than a "
            f"{MARGIN}× margin",
            yellow=True,
        )
        terminalreporter.write_line(
            f"Each passed above this machine's floor (tools/numerics.py). Raise its tolerance "
            f"to keep {MARGIN}× over the difference shown (docs/contributing.md):"
        )
        for line in narrow:
            terminalreporter.write_line(f"  {line}")
    if over:
        terminalreporter.write_sep(
            "-", f"{len(over)} page{'s' * (len(over) > 1)} over budget", yellow=True
        )
        for line in over:
            terminalreporter.write_line(f"  {line}")
    for page in selected_pages(config):
        ran = sorted(tests_of(page) & {p.name for p in TESTS.glob("test_*.py")})
        terminalreporter.write_sep("-", f"{display(page)}: ran {', '.join(ran)}")
