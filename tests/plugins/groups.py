"""Groups for pytest-xdist (`--dist loadgroup`), and the order they run in."""

import math

import pytest

from tools import timings


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the groups
def pytest_collection_modifyitems(config, items):
    """A page's blocks under one configuration have their group (tests/test_docs.py); the
    tests that need the built site share one, so it is built once; any other test goes with
    its file, so its module fixtures load once.

    The longest groups go first, so that no worker is left running one alone at the end:
    the built site's (the build, the browser, the live pages' models), then the pages
    longest in the last run that timed them (tools/timings.py); the rest as collected."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        name = "built-site" if "built_site" in item.fixturenames else item.path.name
        item.add_marker(pytest.mark.xdist_group(name))
    page_seconds = timings.seconds_by_page()

    def longest_first(item) -> float:
        if item.get_closest_marker("xdist_group").args[0] == "built-site":
            return -math.inf
        params = item.callspec.params if hasattr(item, "callspec") else {}
        return -page_seconds.get(params["page"].path, 0.0) if "block" in params else 0.0

    items.sort(key=longest_first)
