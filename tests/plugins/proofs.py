"""`prove`, the fixture every parity test asserts with, which records each proof in the
proof table (tools/proofs.py); the `proof` marker on each test that uses it
(`pytest -m proof`)."""

import sys
from pathlib import Path

import pytest

from snippets.book import cpu_name
from tests.plugins.report import NARROW_MARGIN
from tools import proofs
from tools.numerics import MARGIN, current, describe, required_margin
from tools.pages import display


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "proof: a parity test that records its proof in the proof table (`prove`)"
    )


def pytest_sessionstart(session):
    # a run of the whole suite (no file named, no --page) measures every proof again, as the
    # machine is; the runs under the other configurations (make test-proofs) add to it
    config = session.config
    whole_suite = config.args_source == pytest.Config.ArgsSource.TESTPATHS
    if (
        whole_suite
        and not config.getoption("page")
        and current() == "as-is"
        and not (config.getoption("reader") or hasattr(config, "workerinput"))
    ):
        proofs.clear()


@pytest.hookimpl(tryfirst=True)  # before `-m proof` deselects
def pytest_collection_modifyitems(config, items):
    for item in items:
        if "prove" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.proof)


@pytest.fixture
def prove(request):
    """`prove(component, reference, inputs, ours, theirs, atol)`: asserts that the tensors
    `ours` (the book's) and `theirs` (the reference's) have one shape and differ by at most
    `atol` anywhere, with a 10× margin (3× on the machine as it is, where a margin under 10×
    is reported instead; docs/contributing.md), and records the largest difference in the
    proof table (tools/proofs.py). `inputs` says what went in, as the table shows it."""

    def prove(component, reference, inputs, ours, theirs, atol):
        assert ours.shape == theirs.shape, f"{component}: shape {ours.shape} != {theirs.shape}"
        difference = (ours.double() - theirs.double()).abs().max().item()
        caller = sys._getframe(1).f_code  # the table groups and links a proof by its test
        test = f"{display(Path(caller.co_filename))}::{caller.co_name}"
        proofs.record(component, reference, inputs, atol, difference, test=test)
        assert difference <= atol, (
            f"{component} against {reference} on {inputs}: largest difference "
            f"{difference:.2e}, above the tolerance {atol:.0e}"
        )
        required = required_margin(current())
        assert difference * required <= atol, (
            f"{component} against {reference} on {inputs}: largest difference "
            f"{difference:.2e} leaves the tolerance {atol:.0e} less than a {required:g}× "
            f"margin under {describe(current())} on {cpu_name()}; find why, or raise the "
            "tolerance to keep the margin"
        )
        if difference * MARGIN > atol:
            narrow = (
                f"{request.node.nodeid}: {component} on {inputs}: largest difference "
                f"{difference:.1e}, tolerance {atol:.0e} ({atol / difference:.1f}×), under "
                f"{describe(current())} on {cpu_name()}"
            )
            request.node.user_properties.append((NARROW_MARGIN, narrow))
        return difference

    return prove
