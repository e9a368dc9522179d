"""Test session set-up: offline Hugging Face on the project cache, no display."""

import os

from snippets.models import provision, use_local_hub

# Before anything imports transformers or huggingface_hub: they read these once.
use_local_hub()
os.environ["MPLBACKEND"] = "Agg"

from tests import docs_runner  # noqa: E402


def pytest_sessionstart(session):
    provision()


def pytest_terminal_summary(terminalreporter):
    tally = docs_runner.TALLY
    if tally:
        terminalreporter.write_sep(
            "-",
            f"docs: {tally['executed']} blocks executed, {tally['skipped']} skipped, "
            f"{tally['failed']} failed",
        )
