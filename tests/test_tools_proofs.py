"""The proof table (tools/proofs.py) and `prove` (tests/plugins/proofs.py): every equality is
read from the tests without running them, grouped by chapter, and shown as not measured
until a run records it; a proof is recorded under the configuration that measured it, the
table gives the largest difference over them, and `prove` fails on a difference over the
tolerance or within 10× of it."""

import re
from textwrap import dedent

import pytest
import torch

from tests.plugins.report import NARROW_MARGIN
from tools import numerics, proofs

SOURCE = """
    import pytest

    ATOL = 1e-5


    def test_layer_norm(prove):
        inputs = "a batch"
        prove("LayerNorm by hand", "`torch.nn.LayerNorm`", inputs, ours(), theirs(), ATOL)
        prove("LayerNorm by hand", "`torch.nn.LayerNorm`", "a sum", ours(), theirs(), ATOL)


    @pytest.mark.parametrize("block", [1, 7])
    def test_gelu(prove, block):
        prove(f"GELU by hand, blocks of {block}", "`torch.nn.GELU`", "a grid", ours(),
              theirs(), atol=1e-6)


    def judged(prove, what, error):
        prove(what, "float64", "random scores", ours(), theirs(), 20 * error)


    def test_softmax(prove):
        judged(prove, "softmax by hand", measured())
"""
LAYER_NORM = "tests/test_layer_norm.py::test_layer_norm"


@pytest.fixture
def tests(tmp_path):
    """A tests/ folder of one file of parity tests."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_layer_norm.py").write_text(dedent(SOURCE))
    return tmp_path / "tests"


def test_a_build_with_no_test_run_shows_every_equality_as_not_measured(tests, tmp_path):
    table = proofs.table(tmp_path / "none.json", tests=tests)
    assert "ran no test" in table
    rows = [line for line in table.splitlines() if line.startswith("| [")]
    assert rows == [
        "| [LayerNorm by hand](../tests/test_layer_norm.py#L9) | `torch.nn.LayerNorm` | "
        "a batch | 1e-05 | *not measured here* | — |",
        "| [LayerNorm by hand](../tests/test_layer_norm.py#L10) | `torch.nn.LayerNorm` | "
        "a sum | 1e-05 | *not measured here* | — |",
        "| [GELU by hand, blocks of 1](../tests/test_layer_norm.py#L15) | `torch.nn.GELU` | "
        "a grid | 1e-06 | *not measured here* | — |",
        "| [GELU by hand, blocks of 7](../tests/test_layer_norm.py#L15) | `torch.nn.GELU` | "
        "a grid | 1e-06 | *not measured here* | — |",
        "| [softmax by hand](../tests/test_layer_norm.py#L20) | float64 | random scores | "
        "20 × … | *not measured here* | — |",
    ]


def test_the_table_gives_the_largest_difference_over_the_configurations(
    tests, tmp_path, monkeypatch
):
    recorded = tmp_path / "proofs.json"
    record = {"proofs": recorded, "test": LAYER_NORM}
    proofs.record("LayerNorm by hand", "`torch.nn.LayerNorm`", "a batch", 1e-5, 2e-7, **record)
    monkeypatch.setenv("MKL_CBWR", "COMPATIBLE")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MKL_NUM_THREADS", "1")
    proofs.record("LayerNorm by hand", "`torch.nn.LayerNorm`", "a batch", 1e-5, 4e-7, **record)
    proofs.record("LayerNorm by hand", "`torch.nn.LayerNorm`", "a sum", 1e-5, 0.0, **record)
    table = proofs.table(recorded, tests=tests, repo_url="https://github.com/o/r")
    assert "under 2 numeric configurations: `as-is`, `compatible-1-thread`" in table
    link = "https://github.com/o/r/blob/main/tests/test_layer_norm.py#L9"
    assert (
        f"| [LayerNorm by hand]({link}) | `torch.nn.LayerNorm` | a batch | 1e-05 | 4.0e-07 | 25× |"
    ) in table
    assert (
        f"| [LayerNorm by hand]({link[:-1]}10) | `torch.nn.LayerNorm` | a sum | 1e-05 | 0.0e+00 | "
        "exact |"
    ) in table
    # the tests the record does not hold are still there, not measured
    assert table.count("*not measured here*") == 3


def test_the_table_groups_the_books_proofs_by_chapter_and_misses_no_prove_call(tmp_path):
    table = proofs.table(tmp_path / "none.json", repo_url="https://github.com/o/r")
    blob = "https://github.com/o/r/blob/main/tests"
    assert (
        "### Embeddings\n\n[The chapter](bert/embeddings.md) · its tests: "
        f"[test_bert_embeddings.py]({blob}/test_bert_embeddings.py)"
    ) in table
    lines = table.splitlines()
    embeddings = lines.index("### Embeddings")
    assert lines[embeddings + 8].startswith(
        f"| [BERT embeddings by hand]({blob}/test_bert_embeddings.py#L"
    )
    # every line of the tests that calls prove(...) is a row, and a component is never unknown
    calls = {
        (path.name, number)
        for path in proofs.TESTS.glob("test_*.py")
        if path.name != "test_tools_proofs.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"(^|[^\w.])prove\(", line)
    }
    rows = re.findall(rf"^\| \[(.*?)\]\({blob}/(test_\w+\.py)#L(\d+)\)", table, re.M)
    assert {(name, int(number)) for _, name, number in rows} == calls
    assert "…" not in {component for component, _, _ in rows}


@pytest.fixture
def unrecorded(monkeypatch, tmp_path):
    """`prove`'s records go to a scratch table, not the run's."""
    monkeypatch.setattr(proofs, "PROOFS", tmp_path / "proofs.json")
    monkeypatch.setattr(proofs.record, "__defaults__", (tmp_path / "proofs.json",))


def test_prove_holds_a_difference_ten_times_under_the_tolerance(prove, unrecorded, tmp_path):
    a = torch.tensor([1.0, 2.0])
    assert prove("x", "y", "z", a + 5e-7, a, atol=1e-5) == pytest.approx(5e-7, rel=0.1)
    (row,) = proofs.read_json(tmp_path / "proofs.json")["proofs"].values()
    assert row["test"] == "tests/test_tools_proofs.py::" + (
        "test_prove_holds_a_difference_ten_times_under_the_tolerance"
    )


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


def test_the_table_marks_a_margin_under_ten_times(tests, tmp_path):
    recorded = tmp_path / "proofs.json"
    proofs.record(
        "LayerNorm by hand",
        "`torch.nn.LayerNorm`",
        "a batch",
        1e-5,
        2.5e-6,
        recorded,
        test=LAYER_NORM,
    )
    assert "| 1e-05 | 2.5e-06 | **4.0×, under 10×** |" in proofs.table(recorded, tests=tests)


def test_prove_fails_on_shapes_that_differ(prove, unrecorded):
    with pytest.raises(AssertionError, match="shape"):
        prove("x", "y", "z", torch.zeros(2, 3), torch.zeros(3), atol=1e-5)


def test_the_built_site_shows_the_table_by_chapter(built_site):
    page = (built_site / "proofs" / "index.html").read_text()
    # one table for each chapter, whatever the last test run measured
    groups = proofs.table().count('<div class="proof-table" markdown>')
    assert groups > 20
    assert page.count('<div class="proof-table">') == groups
    assert '<a href="../bert/embeddings/">The chapter</a>' in page
    assert re.search(
        r'<td><a href="[^"]*/tests/test_bert_embeddings\.py#L\d+">BERT embeddings', page
    )
