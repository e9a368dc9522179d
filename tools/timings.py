"""How long each chapter took to run as a notebook in the last test run.

The tests record it (tests/test_docs.py); the site prints it under each chapter's
title. Nothing here is typed by hand: a page that was not run says so.
"""

from __future__ import annotations

import os
from pathlib import Path

from snippets.book import CACHE, read_json, write_json
from tools.pages import DOCS

TIMINGS = CACHE / "page-timings.json"


def record(page: Path, seconds: float, timings: Path = TIMINGS) -> None:
    """Store a page's run time, with the machine and versions it was measured with."""
    import torch
    import transformers

    measured = read_json(timings)
    measured[page.relative_to(DOCS).as_posix()] = {
        "seconds": round(seconds, 1),
        "cpus": os.cpu_count(),
        "torch": torch.__version__.split("+")[0],
        "transformers": transformers.__version__,
    }
    write_json(timings, measured)


def provenance(page: Path, timings: Path = TIMINGS) -> str:
    """The line under a chapter's title: how long it runs, on what, with which versions."""
    measured = read_json(timings).get(page.relative_to(DOCS).as_posix())
    if measured is None:
        return "Not timed yet on this machine: `make test` measures every page."
    return (
        f"Runs in {measured['seconds']} s on {measured['cpus']} CPU cores · tested with "
        f"torch {measured['torch']}, transformers {measured['transformers']}"
    )
