"""tools/timings.py: the line under a chapter's title says only what was measured; the
tests start the pages that took longest first."""

import torch
import transformers

from tools import timings
from tools.pages import DOCS

PAGE = DOCS / "bert" / "tokenizer.md"
VERSIONS = f"torch {torch.__version__.split('+')[0]}, transformers {transformers.__version__}"


def test_a_build_with_no_timing_shows_the_versions_only(tmp_path):
    assert timings.provenance(PAGE, tmp_path / "none.json") == f"Tested with {VERSIONS}"


def test_a_timed_page_shows_its_time_cores_and_versions(tmp_path):
    measured = tmp_path / "timings.json"
    timings.record(PAGE, 3.14159, 5.0, measured)
    line = timings.provenance(PAGE, measured)
    assert line.startswith("Runs in 3.1 s on ") and line.endswith(f"tested with {VERSIONS}")
    assert "make test" not in line and "Not timed" not in line


def test_a_time_measured_with_other_versions_is_not_shown(tmp_path):
    measured = tmp_path / "timings.json"
    timings.record(PAGE, 2.0, 3.0, measured)
    data = measured.read_text().replace(transformers.__version__, "0.0.1")
    measured.write_text(data)
    assert timings.provenance(PAGE, measured) == f"Tested with {VERSIONS}"


def test_the_tests_read_back_each_pages_time_to_start_the_longest_first(tmp_path):
    measured = tmp_path / "timings.json"
    assert timings.seconds_by_page(measured) == {}
    timings.record(PAGE, 3.14159, 5.0, measured)
    timings.record(DOCS / "bert" / "model.md", 20.0, 30.0, measured)
    assert timings.seconds_by_page(measured) == {PAGE: 3.1, DOCS / "bert" / "model.md": 20.0}


def test_a_page_has_the_default_budget_or_the_one_its_front_matter_gives(tmp_path):
    assert timings.budget(PAGE) == timings.BUDGET
    page = tmp_path / "slow.md"
    page.write_text('---\nbudget:\n  cpu_seconds: 45\n  why: "trains"\n---\n# Slow\n')
    assert timings.budget(page) == 45
