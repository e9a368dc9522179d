"""Where the book's files are, and the two ways they are written.

Every other module finds the repository, its cache and its nav through here; no
other module works out a path from its own location.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCS = REPO_ROOT / "docs"
CACHE = REPO_ROOT / ".cache"  # git-ignored: the project's Hugging Face cache, timings, runs
MKDOCS_YML = REPO_ROOT / "mkdocs.yml"
NOT_CHAPTERS = ("labs/", "live/")  # folders under docs/ of pages that are not chapters


def read_json(path: Path) -> dict:
    """The JSON object in `path`, or {} when there is no such file yet."""
    return json.loads(path.read_text()) if path.exists() else {}


def write_json(path: Path, data: dict) -> None:
    """Write `data` whole or not at all, in a stable order (same data, same bytes)."""
    write_atomically(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def write_atomically(path: Path, text: str) -> None:
    with replaced_whole(path, "w") as file:
        file.write(text)


@contextlib.contextmanager
def replaced_whole(path: Path, mode: str = "wb"):
    """A file to write `path` with: it replaces `path` only once written without error,
    so a reader, or an interrupted run, never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(mode, dir=path.parent, delete=False) as file:
        try:
            yield file
        except BaseException:
            file.close()
            os.unlink(file.name)
            raise
    os.replace(file.name, path)


@contextlib.contextmanager
def staged_folder(target: Path):
    """Fill a temporary folder beside `target`, then rename it into place.

    Used as `with staged_folder(target) as staging: ...write into staging...`. The
    rename happens only if the block finishes: an interrupted or failed run leaves
    no half-written `target`, and an earlier `target` is replaced whole.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".partial-", dir=target.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; what it holds is for everyone to read
    try:
        yield staging
        if target.exists():
            shutil.rmtree(target)
        os.rename(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def nav(config_file: Path = MKDOCS_YML) -> list[tuple[str, list[tuple[str, str]]]]:
    """The site's nav as (section title, [(page title, page path under docs/)]).

    Pages at the top level of the nav form a section titled "".
    """
    return _nav(config_file)


@functools.cache
def _nav(config_file: Path):
    from mkdocs.config import load_config

    sections: list[tuple[str, list[tuple[str, str]]]] = []

    def walk(node, section):
        if isinstance(node, str):
            section.append(("", node))
        elif isinstance(node, list):
            for item in node:
                walk(item, section)
        elif isinstance(node, dict):
            for title, value in node.items():
                if isinstance(value, str):
                    section.append((title, value))
                else:
                    pages: list[tuple[str, str]] = []
                    sections.append((title, pages))
                    walk(value, pages)

    top: list[tuple[str, str]] = []
    walk(load_config(str(config_file)).nav, top)
    return [("", top), *sections] if top else sections


def nav_pages(config_file: Path = MKDOCS_YML) -> frozenset[str]:
    """Every page the nav lists, as a path under docs/."""
    return frozenset(page for _, pages in nav(config_file) for _, page in pages)


def parts(config_file: Path = MKDOCS_YML) -> list[tuple[str, list[tuple[str, str]]]]:
    """The book's parts, in nav order: (part title, [(chapter title, page under docs/)]).

    A part is a titled section of the nav that holds chapters. Notebooks and live pages
    (labs/, live/) are not chapters, nor are the top-level pages. This is the one list of
    the parts: a new part is a new section of the nav.
    """
    found = []
    for title, pages in nav(config_file):
        chapters = [(name, page) for name, page in pages if not page.startswith(NOT_CHAPTERS)]
        if title and chapters:
            found.append((title, chapters))
    return found


def front_matter(page: Path) -> dict:
    """A page's YAML front matter, read as MkDocs reads it ({} when it has none)."""
    from mkdocs.utils.meta import get_data

    return get_data(page.read_text(encoding="utf-8"))[1]


def computed_once(name: str, sources: list[bytes], compute) -> dict:
    """`compute()`'s JSON result, kept in .cache/<name>-<digest>.json.

    The digest covers torch's version and `sources` (the code that computes it): a
    change to them computes again, anything else reads the file. Used for the
    measurements and runs that figures draw, which take tens of seconds and vary
    from run to run; the same file gives the same figure.
    """
    import torch

    digest = hashlib.sha256(torch.__version__.encode())
    for source in sources:
        digest.update(source)
    cache = CACHE / f"{name}-{digest.hexdigest()[:16]}.json"
    if cache.exists():
        return read_json(cache)
    result = compute()
    for stale in CACHE.glob(f"{name}-*.json"):
        stale.unlink(missing_ok=True)
    write_json(cache, result)
    # as read back, keys sorted and tuples made lists: a figure drawn from a fresh result
    # is the figure drawn from the kept file (the prefill-decode figure's panels swapped)
    return read_json(cache)


def cpu_name() -> str:
    """The CPU's model name, as /proc/cpuinfo gives it (the machine elsewhere): what
    names the machine beside a measurement."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()
