"""The proof table (tools/proofs.py) and `prove` (tests/conftest.py): a proof is recorded
under the configuration that measured it, the table gives the largest difference over
them, and `prove` fails on a difference over the tolerance or within 10× of it."""

import pytest
import torch

from tools import proofs


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


@pytest.mark.parametrize(
    ("gap", "says"), [(2e-5, "above the tolerance"), (3e-6, "less than a 10× margin")]
)
def test_prove_fails_over_the_tolerance_and_within_its_margin(prove, unrecorded, gap, says):
    a = torch.tensor([1.0, 2.0])
    with pytest.raises(AssertionError, match=says):
        prove("x", "y", "z", a + gap, a, atol=1e-5)


def test_prove_fails_on_shapes_that_differ(prove, unrecorded):
    with pytest.raises(AssertionError, match="shape"):
        prove("x", "y", "z", torch.zeros(2, 3), torch.zeros(3), atol=1e-5)
