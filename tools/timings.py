"""How long each chapter took to run as a notebook in the last test run, and what it may
cost.

The tests record each page's wall time and its kernel's CPU seconds (tests/test_docs.py);
the site prints the wall time under each chapter's title, with the versions. Nothing here
is typed by hand: a build with no timing from these versions shows the versions only.

A page's budget is in CPU seconds, which a busy machine moves far less than wall time:
BUDGET, or the page's own, with the reason, in its front matter. Over it, the test run's
summary warns; over twice it, the page's budget test fails (docs/contributing.md).
"""

from __future__ import annotations

import os
from pathlib import Path

from snippets.book import CACHE, front_matter, read_json, write_json
from tools.pages import DOCS

TIMINGS = CACHE / "page-timings.json"

BUDGET = 20  # CPU seconds a page may use as-is, kernel start included


def budget(page: Path) -> float:
    """The CPU seconds a page may use as-is: BUDGET, or the page's own, given in its front
    matter with the reason, `budget: {cpu_seconds: 60, why: "..."}`."""
    own = front_matter(page).get("budget")
    return own["cpu_seconds"] if own else BUDGET


def record(page: Path, seconds: float, cpu_seconds: float, timings: Path = TIMINGS) -> None:
    """Store a page's run time and CPU seconds, with the machine and versions they were
    measured with, and how many other tests ran beside it (pytest-xdist's other workers)."""
    import fcntl

    import torch
    import transformers

    timings.parent.mkdir(parents=True, exist_ok=True)
    # the workers of one test run record into the same file: one at a time
    with open(timings.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        measured = read_json(timings)
        measured[page.relative_to(DOCS).as_posix()] = {
            "seconds": round(seconds, 1),
            "cpu_seconds": round(cpu_seconds, 1),
            "cpus": os.cpu_count(),
            "beside": int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) - 1,
            "torch": torch.__version__.split("+")[0],
            "transformers": transformers.__version__,
        }
        write_json(timings, measured)


def seconds_by_page(timings: Path = TIMINGS) -> dict[Path, float]:
    """Each timed page's run time in the last test run that timed it."""
    return {DOCS / name: measured["seconds"] for name, measured in read_json(timings).items()}


def provenance(page: Path, timings: Path = TIMINGS) -> str:
    """The line under a chapter's title: the versions it is tested with and, when the test
    run that preceded this build timed it, how long it ran and on how many cores."""
    import torch
    import transformers

    tested = f"torch {torch.__version__.split('+')[0]}, transformers {transformers.__version__}"
    measured = read_json(timings).get(page.relative_to(DOCS).as_posix())
    if measured is None or (measured["torch"], measured["transformers"]) != (
        torch.__version__.split("+")[0],
        transformers.__version__,
    ):
        return f"Tested with {tested}"
    others = measured.get("beside", 0)
    beside = {0: "", 1: " (timed while another test ran beside it)"}.get(
        others, f" (timed while {others} other tests ran beside it)"
    )
    return (
        f"Runs in {measured['seconds']} s on {measured['cpus']} CPU cores{beside}"
        f" · tested with {tested}"
    )
