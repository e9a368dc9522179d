"""Run a page once, as the notebook a reader downloads, in a fresh Jupyter kernel.

One run gives everything the tests need to say about a page:

- what each python block printed, to compare with the output the page shows;
- for the first block that raised: the page line of the failing statement, the
  exception, and a traceback whose lines point at the page, or into snippets/
  for included code;
- how long the page took, kernel start included, as a reader would wait;
- proof that the downloadable notebook runs top to bottom.

The kernel starts in an empty scratch folder: a reader's session has no snippets/
to import, so neither has the page. sh and bash blocks run in a shell, in the
same folder. Nothing here imports pytest: the tests turn `BlockSkipped` and
`BlockFailure` into their outcomes.
"""

from __future__ import annotations

import difflib
import json
import subprocess
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from tools.notebooks import to_notebook
from tools.pages import Block, Page, display

CELL_TIMEOUT = 600  # seconds a block may run before it counts as failed

# Run in the kernel after a cell raised: the frames of the exception, and for each
# frame in a cell, that cell's execution count (IPython names a frame "In[n]").
FRAMES = """\
import json as _json, sys as _sys, traceback as _traceback
print(_json.dumps([
    [f.filename, f.lineno, f.name, f.line, get_ipython().compile.format_code_name(f.filename)]
    for f in _traceback.extract_tb(_sys.last_traceback)
]))
"""


class BlockFailure(Exception):
    """A block raised, or printed something other than its expected output."""


class BlockSkipped(Exception):
    """A block that did not run: skipped by its page, or after an earlier block failed."""


@dataclass
class PageRun:
    page: Page
    workdir: Path
    seconds: float = 0.0  # the whole notebook, kernel start included
    printed: dict[int, str] = field(default_factory=dict)  # block line -> what it printed
    failed_at: Block | None = None  # the first block that raised; later blocks did not run
    failure: str = ""

    def check(self, block: Block) -> str:
        """What the block printed; raises BlockFailure or BlockSkipped."""
        if block.skip_reason is not None:
            raise BlockSkipped(f"{block.where}: {block.skip_reason}")
        if block.syntax != "python":
            output = _run_shell(block, self.workdir)
        elif self.failed_at is block:
            raise BlockFailure(self.failure)
        elif block.lineno not in self.printed:
            raise BlockSkipped(
                f"{block.where}: not run, an earlier block of this page failed "
                f"({self.failed_at.where if self.failed_at else 'the set-up cell'})"
            )
        else:
            output = self.printed[block.lineno]
        check_output(block, output)
        return output

    @property
    def passed(self) -> bool:
        return self.failed_at is None and all(
            normalise(self.printed.get(b.lineno, "")) == normalise(b.expected_output or "")
            for b in self.page.cells
        )


def run_page(page: Page, workdir: Path | None = None) -> PageRun:
    """Execute the page's notebook top to bottom, stopping at the first block that raises."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    run = PageRun(page, workdir or Path(tempfile.mkdtemp(prefix="tbt-page-")))
    if not page.cells:
        return run
    notebook = to_notebook(page, None)  # links in the prose run nothing
    code_cells = [c for c in notebook.cells if c.cell_type == "code"]
    blocks = dict(zip(map(id, code_cells[1:]), page.cells, strict=True))  # after the set-up
    client = NotebookClient(
        notebook, timeout=CELL_TIMEOUT, kernel_name="python3",
        resources={"metadata": {"path": str(run.workdir)}},
    )  # fmt: skip
    started = time.perf_counter()
    with client.setup_kernel():
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code":
                continue
            block = blocks.get(id(cell))
            try:
                client.execute_cell(cell, index)
            except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
                run.failed_at = block or page.cells[0]
                run.failure = _describe_failure(client, notebook, blocks, block, cell, exc)
                break
            finally:
                if block is not None:
                    run.printed[block.lineno] = _stdout(cell)
    run.seconds = time.perf_counter() - started
    if run.failed_at is not None:
        run.printed.pop(run.failed_at.lineno, None)
    return run


def _stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")


def _describe_failure(client, notebook, blocks, block, cell, exc) -> str:
    if block is None:
        return f"the notebook's set-up cell failed:\n{exc}"
    error = next((o for o in cell.outputs if o.output_type == "error"), None)
    if error is None:  # a timeout or a dead kernel: no exception inside the kernel
        return f"{block.where}: {type(exc).__name__}: {exc}"
    by_count = {c.get("execution_count"): blocks.get(id(c)) for c in notebook.cells}
    frames = _mapped_frames(_kernel_frames(client, notebook), by_count)
    failing = f"{frames[0].filename}:{frames[0].lineno}" if frames else block.where
    exception = f"{error.ename}: {error.evalue}"
    parts = [
        f"{failing}: {exception}",
        f"  (in the python block that starts at {block.where})",
        "",
        "Traceback (most recent call last):",
        *"".join(traceback.StackSummary.from_list(frames).format()).rstrip().splitlines(),
        exception,
    ]
    printed = _stdout(cell)
    if printed:
        parts += ["", "The block printed, before failing:", printed.rstrip()]
    return "\n".join(parts).rstrip()


def _kernel_frames(client, notebook) -> list:
    cell = nbformat.v4.new_code_cell(FRAMES)
    notebook.cells.append(cell)
    try:
        client.execute_cell(cell, len(notebook.cells) - 1, store_history=False)
        return json.loads(_stdout(cell))
    except Exception:  # the kernel died: no frames to show, the exception still is
        return []
    finally:
        notebook.cells.pop()


def _mapped_frames(frames: list, by_count: dict) -> list[traceback.FrameSummary]:
    """The frames from the first cell on; a cell's lines become page or snippets lines."""
    mapped = []
    for filename, lineno, name, line, code_name in frames:
        block = by_count.get(int(code_name[1][3:-1])) if code_name else None  # "In[12]"
        if block is None and not mapped:
            continue  # IPython's own frames, before the cell
        if block is not None and 0 < lineno <= len(block.origins):
            filename, lineno = block.origins[lineno - 1]
        mapped.append(traceback.FrameSummary(filename, lineno, name, line=line))
    return mapped


def _run_shell(block: Block, workdir: Path) -> str:
    result = subprocess.run(
        block.code, shell=True, capture_output=True, text=True, cwd=workdir,
        executable="/bin/bash" if block.syntax == "bash" else None,
    )  # fmt: skip
    if result.returncode != 0:
        raise BlockFailure(
            f"{block.where}: the {block.syntax} block exited with status "
            f"{result.returncode}\n{result.stdout}{result.stderr}"
        )
    return result.stdout


def check_output(block: Block, output: str) -> None:
    expected = block.expected_output
    if expected is None:
        if output.strip():
            raise BlockFailure(
                f"{block.where}: the block prints output that the page does not show. Add, "
                "right after the block:\n\n<!--pytest-codeblocks:expected-output-->\n```text\n"
                f"{output.rstrip()}\n```"
            )
        return
    if normalise(output) == normalise(expected):
        return
    diff = difflib.unified_diff(
        normalise(expected).splitlines(),
        normalise(output).splitlines(),
        fromfile=f"shown on the page ({display(block.page)}:{block.expected_lineno})",
        tofile=f"printed by the block ({block.where})",
        lineterm="",
    )
    raise BlockFailure(
        f"{block.where}: the block's output differs from the expected output on the page\n"
        + "\n".join(diff)
    )


def normalise(text: str) -> str:
    """Trailing spaces and blank lines at the end are invisible on the page."""
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())
