"""The numeric configurations (tools/numerics.py) reach a page's kernel, and a page that
prints differently under one, or whose comparison has a thin margin, fails with the
page's line, the configuration and the first line that differs (tools/execute.py)."""

import subprocess
import sys
import textwrap

import pytest

from tools import numerics
from tools.execute import BlockFailure, run_page
from tools.pages import parse


def page_from(tmp_path, markdown):
    path = tmp_path / "chapter.md"
    path.write_text(textwrap.dedent(markdown).lstrip())
    return parse(path)


# shows what the machine as it is prints: no MKL_CBWR
ENVIRONMENT_PAGE = """
    # T

    ```python
    import os

    print("shape (2, 3)")
    print(os.environ.get("MKL_CBWR"))
    ```

    <!--pytest-codeblocks:expected-output-->
    ```text
    shape (2, 3)
    None
    ```
"""


def test_a_page_passes_as_it_is_and_fails_under_a_configuration_that_prints_otherwise(
    tmp_path,
):
    page = page_from(tmp_path, ENVIRONMENT_PAGE)
    run_page(page, "as-is").check(page.cells[0])
    with pytest.raises(BlockFailure) as failure:
        run_page(page, "compatible-1-thread").check(page.cells[0])
    message = str(failure.value)
    assert message.startswith(f"{page.cells[0].where}: under compatible-1-thread (MKL_CBWR=")
    assert "from its line 2 on" in message
    assert "  shown:   None\n  printed: COMPATIBLE" in message


def test_each_configuration_reaches_torch():
    for name, variables in numerics.CONFIGURATIONS.items():
        threads = variables.get("OMP_NUM_THREADS")
        printed = subprocess.run(
            [
                sys.executable,
                "-m",
                "tools.numerics",
                name,
                sys.executable,
                "-c",
                "import torch; from tools import numerics; "
                "print(torch.get_num_threads(), numerics.current())",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert printed[1] == name
        if threads:
            assert printed[0] == threads


THIN_MARGIN_PAGE = """
    # T

    ```python
    import torch

    a = torch.tensor([1.0, 2.0])
    print(torch.allclose(a, a + 2**-18, rtol=0, atol=1e-5))
    print(torch.allclose(a, a + 2**-15, rtol=0, atol=1e-5))
    print(torch.allclose(a, a + 1e-7, rtol=0, atol=1e-5), torch.allclose(a, a + 1.0, rtol=0))
    ```

    <!--pytest-codeblocks:expected-output-->
    ```text
    True
    False
    True False
    ```
"""


def test_under_a_named_configuration_a_comparison_within_ten_times_its_tolerance_fails(
    tmp_path,
):
    page = page_from(tmp_path, THIN_MARGIN_PAGE)
    with pytest.raises(BlockFailure) as failure:
        run_page(page, "compatible-1-thread").check(page.cells[0])
    first, second, *rest = str(failure.value).splitlines()
    assert first.endswith(
        "chapter.md:7: torch.allclose is True, with a difference at 38% of its tolerance: "
        "less than a 10× margin (largest difference 3.8e-06, atol=1e-05, rtol=0)"
    )
    assert "chapter.md:8: torch.allclose is False, by only 3.1× its tolerance" in second
    assert "chapter.md:9" not in "\n".join(rest)  # 1e-7 and 1.0 are far from 1e-5
    assert "keep a 10× margin under it" in str(failure.value)


def test_as_it_is_a_comparison_fails_under_the_floor_and_is_reported_under_ten_times(
    tmp_path,
):
    """On the machine as it is, 2.6× (line 7) fails, 3.1× (line 8) passes, reported."""
    page = page_from(tmp_path, THIN_MARGIN_PAGE)
    run = run_page(page, "as-is")
    with pytest.raises(BlockFailure) as failure:
        run.check(page.cells[0])
    assert "chapter.md:7: torch.allclose is True" in str(failure.value)
    assert "chapter.md:8" not in str(failure.value)
    assert "keep a 3× margin under it" in str(failure.value)
    (narrow,) = run.narrow_margins[page.cells[0].lineno]
    assert "chapter.md:8: torch.allclose is False, by only 3.1× its tolerance" in narrow
