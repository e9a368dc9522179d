"""The proof table (tools/proofs.py) and `prove` (tests/conftest.py): a proof is recorded
under the configuration that measured it, the table gives the largest difference over
them, and `prove` fails on a difference over the tolerance or within 10× of it."""

import pytest
import torch

from tests.conftest import NARROW_MARGIN
from tools import numerics, proofs


def test_the_table_gives_the_largest_difference_over_the_configurations(tmp_path, monkeypatch):
    recorded = tmp_path / "proofs.json"
    proofs.record("LayerNorm by hand", "`torch.nn.LayerNorm`", "a batch", 1e-5, 2e-7, recorded)
    monkeypatch.setenv("MKL_CBWR", "COMPATIBLE")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MKL_NUM_THREADS", "1")
    proofs.record("LayerNorm by hand", "`torch.nn.LayerNorm`", "a batch", 1e-5, 4e-7, recorded)
    proofs.record("GELU by hand", "`torch.nn.GELU`", "a grid", 1e-6, 0.0, recorded)
    table = proofs.table(recorded)
    assert "under 2 numeric configurations: `as-is`, `compatible-1-thread`" in table
    assert "| LayerNorm by hand | `torch.nn.LayerNorm` | a batch | 1e-05 | 4.0e-07 | 25× |" in table
    assert "| GELU by hand | `torch.nn.GELU` | a grid | 1e-06 | 0.0e+00 | exact |" in table


def test_a_build_with_no_test_run_says_so(tmp_path):
    assert "no test run" in proofs.table(tmp_path / "none.json")


@pytest.fixture
def unrecorded(monkeypatch, tmp_path):
    """`prove`'s records go to a scratch table, not the run's."""
    monkeypatch.setattr(proofs, "PROOFS", tmp_path / "proofs.json")
    monkeypatch.setattr(proofs.record, "__defaults__", (tmp_path / "proofs.json",))


def test_prove_holds_a_difference_ten_times_under_the_tolerance(prove, unrecorded):
    a = torch.tensor([1.0, 2.0])
    assert prove("x", "y", "z", a + 5e-7, a, atol=1e-5) == pytest.approx(5e-7, rel=0.1)


@pytest.fixture
def named_configuration(monkeypatch):
    """This process reads as compatible-1-thread (tools.numerics.current)."""
    for key, value in numerics.CONFIGURATIONS["compatible-1-thread"].items():
        monkeypatch.setenv(key, value)


@pytest.mark.parametrize(
    ("gap", "says"), [(2e-5, "above the tolerance"), (3e-6, "less than a 10× margin")]
)
def test_under_a_named_configuration_prove_fails_within_ten_times(
    prove, unrecorded, named_configuration, gap, says
):
    a = torch.tensor([1.0, 2.0])
    with pytest.raises(AssertionError, match=says):
        prove("x", "y", "z", a + gap, a, atol=1e-5)


def test_as_it_is_prove_fails_under_the_floor_and_reports_under_ten_times(
    request, prove, unrecorded, monkeypatch
):
    for key in {k for variables in numerics.CONFIGURATIONS.values() for k in variables}:
        monkeypatch.delenv(key, raising=False)
    a = torch.tensor([1.0, 2.0])
    with pytest.raises(AssertionError, match="less than a 3× margin"):
        prove("x", "y", "z", a + 2**-18, a, atol=1e-5)  # 2.6×
    assert request.node.user_properties == []
    prove("x", "y", "z", a + 2**-19, a, atol=1e-5)  # 5.2×
    ((name, narrow),) = request.node.user_properties
    assert name == NARROW_MARGIN
    assert ": x on z: largest difference 1.9e-06, tolerance 1e-05 (5.2×), under as-is" in narrow
    request.node.user_properties.clear()  # the run's summary is not this test's to fill


def test_the_table_marks_a_margin_under_ten_times(tmp_path):
    recorded = tmp_path / "proofs.json"
    proofs.record("GELU by hand", "`torch.nn.GELU`", "a grid", 1e-5, 2.5e-6, recorded)
    assert "| 1e-05 | 2.5e-06 | **4.0×, under 10×** |" in proofs.table(recorded)


def test_prove_fails_on_shapes_that_differ(prove, unrecorded):
    with pytest.raises(AssertionError, match="shape"):
        prove("x", "y", "z", torch.zeros(2, 3), torch.zeros(3), atol=1e-5)
