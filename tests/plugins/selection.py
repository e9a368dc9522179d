"""What a run collects: `--page`, which narrows it to one page and the tests that check
it; `--configuration`, the numeric configurations the pages run under; and `--reader`,
which runs the reader tests alone."""

from pathlib import Path

import pytest

from snippets.book import REPO_ROOT
from tools.numerics import CONFIGURATIONS
from tools.pages import DOCS, included_modules
from tools.scaffold import page_test_file


def pytest_addoption(parser):
    parser.addoption(
        "--page",
        action="append",
        default=[],
        metavar="docs/PART/PAGE.md",
        help="run only this page (as its notebook), its own tests and the tests of the "
        "snippets it includes; may be given more than once",
    )
    parser.addoption(
        "--configuration",
        action="append",
        default=[],
        choices=sorted(CONFIGURATIONS),
        help="run the pages under this numeric configuration (tools/numerics.py); may be "
        "given more than once. Default: as-is, or all of them with --page",
    )
    parser.addoption(
        "--reader",
        action="store_true",
        help="run the built site as readers run it (tests/test_site_reader.py): pasted into "
        "Python with no HF_* variable, and as notebooks in fresh virtual environments",
    )


def selected_pages(config) -> list[Path]:
    """The pages given with --page, checked; [] when the whole book runs."""
    chosen = []
    for given in config.getoption("page"):
        path = Path(given).resolve()
        if path.suffix != ".md" or DOCS.resolve() not in path.parents or not path.is_file():
            raise pytest.UsageError(f"--page {given}: not a page under docs/ (docs/PART/PAGE.md)")
        chosen.append(path)
    return chosen


def selected_configurations(config) -> list[str]:
    """The numeric configurations the pages run under, in CONFIGURATIONS' order."""
    chosen = config.getoption("configuration") or (
        list(CONFIGURATIONS) if config.getoption("page") else ["as-is"]
    )
    return [name for name in CONFIGURATIONS if name in chosen]


def tests_of(page: Path) -> set[str]:
    """The test files that check a page: its own, with those of its aspects (for
    docs/live/attention.md, test_live_attention.py and test_live_attention_tokenizer.py),
    and those of the snippets it includes."""
    own = page_test_file(page.relative_to(DOCS).as_posix())
    aspects = {path.name for path in (REPO_ROOT / own.parent).glob(f"{own.stem}_*.py")}
    modules = {f"test_snippets_{Path(name).stem}.py" for name in included_modules(page)}
    return {"test_docs.py", own.name, *aspects, *modules}


def pytest_ignore_collect(collection_path, config):
    if collection_path.name == "test_site_reader.py":
        return not config.getoption("reader")
    pages = selected_pages(config)
    if not pages or collection_path.is_dir() or not collection_path.name.startswith("test_"):
        return None
    return collection_path.name not in set().union(*map(tests_of, pages))
