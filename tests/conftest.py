"""Test session set-up: offline Hugging Face on the project cache, no display."""

import os
import subprocess
import sys

import pytest

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


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """The site, built once per run with `mkdocs build --strict`."""
    site_dir = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=docs_runner.REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr}"
    return site_dir
