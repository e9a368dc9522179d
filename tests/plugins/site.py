"""The built site, `built_site`: built once with `mkdocs build --strict`, and kept in
.cache/site/ until a file it is built from changes, so that the reader tests
(`make test-reader`, after `make test` in CI) use the site `make test` built."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from snippets.book import REPO_ROOT

# what `mkdocs build` reads
SITE_INPUTS = [
    "docs",
    "overrides",
    "snippets",
    "tools",
    "hooks.py",
    "mkdocs.yml",
    "pyproject.toml",
    "constraints.txt",
]
BUILT_SITE = REPO_ROOT / ".cache" / "site"


def site_inputs_digest(root: Path = REPO_ROOT) -> str:
    """A digest of every file the build reads, and of SITE_URL, which the notebooks link.

    Left out: the page timings and the proof table's measurements in .cache/, which only
    the provenance lines and docs/proofs.md print; a run records them as it goes, and a
    site built at its start is no less the site of these sources."""
    import hashlib

    digest = hashlib.sha256(os.environ.get("SITE_URL", "").encode())
    for name in SITE_INPUTS:
        top = root / name
        for path in sorted([top] if top.is_file() else top.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(path.relative_to(root).as_posix().encode() + b"\0")
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


@pytest.fixture(scope="session")
def built_site():
    """The site, built with `mkdocs build --strict` unless .cache/site/ was built from
    these very sources (site_inputs_digest)."""
    import fcntl

    BUILT_SITE.parent.mkdir(parents=True, exist_ok=True)
    with open(BUILT_SITE.with_suffix(".lock"), "w") as lock:  # one build at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = BUILT_SITE.with_suffix(".digest")
        if stamp.is_file() and stamp.read_text() == site_inputs_digest():
            return BUILT_SITE
        stamp.unlink(missing_ok=True)
        shutil.rmtree(BUILT_SITE, ignore_errors=True)
        result = subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(BUILT_SITE)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr}"
        stamp.write_text(site_inputs_digest())  # after: the build draws figures that changed
    return BUILT_SITE
