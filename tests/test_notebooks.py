"""Every chapter's notebook runs top to bottom in a fresh Jupyter kernel and prints
what the page shows. Its run time is the one each page states."""

import json
import os
import time

import pytest
import torch
import transformers
from nbclient import NotebookClient

from tests import docs_runner, notebooks

CHAPTERS = [
    page for page in map(docs_runner.parse, docs_runner.pages()) if notebooks.has_notebook(page)
]


@pytest.mark.parametrize("page", CHAPTERS, ids=lambda page: docs_runner.display(page.path))
def test_the_notebook_runs_and_prints_what_the_page_shows(page, tmp_path):
    notebook = notebooks.to_notebook(page, "http://127.0.0.1:8000/", notebooks.setup_cell())
    expected = [_stdout(cell) for cell in notebook.cells if cell.cell_type == "code"]
    client = NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    )
    started = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - started
    printed = [_stdout(cell) for cell in notebook.cells if cell.cell_type == "code"]
    for number, (shown, got) in enumerate(zip(expected, printed, strict=True)):
        assert docs_runner.normalise(got) == docs_runner.normalise(shown), (
            f"{docs_runner.display(page.path)}: code cell {number} of its notebook printed\n"
            f"{got}\ninstead of\n{shown}"
        )
    _record(page, seconds)


def _stdout(cell):
    return "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")


def _record(page, seconds):
    """The page's run time, as a reader running its notebook would see it."""
    timings = json.loads(docs_runner.TIMINGS.read_text()) if docs_runner.TIMINGS.exists() else {}
    timings[page.path.relative_to(docs_runner.DOCS).as_posix()] = {
        "seconds": round(seconds, 1),
        "cpus": os.cpu_count(),
        "torch": torch.__version__.split("+")[0],
        "transformers": transformers.__version__,
    }
    docs_runner.TIMINGS.parent.mkdir(parents=True, exist_ok=True)
    docs_runner.TIMINGS.write_text(json.dumps(timings, indent=1, sort_keys=True) + "\n")
