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
import math
import subprocess
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from snippets.book import cpu_name
from tools.exercises import exercises
from tools.notebooks import to_notebook
from tools.numerics import MARGIN, describe, environment, required_margin
from tools.pages import Block, Page, display

CELL_TIMEOUT = 600  # seconds a block may run before it counts as failed
# seconds to wait for a block's late output, then fail saying so (nbclient's default drops it)
IOPUB_TIMEOUT = 120
KERNEL_OPTIONS = {"iopub_timeout": IOPUB_TIMEOUT, "raise_on_iopub_timeout": True}


# Run in the kernel after a cell raised: the frames of the exception, and for each
# frame in a cell, that cell's execution count (IPython names a frame "In[n]").
FRAMES = """\
import json as _json, sys as _sys, traceback as _traceback
print(_json.dumps([
    [f.filename, f.lineno, f.name, f.line, get_ipython().compile.format_code_name(f.filename)]
    for f in _traceback.extract_tb(_sys.last_traceback)
]))
"""


# Run in the kernel after the page, for each exercise: each classic mistake its checker
# knows, checked in place of the reader's function, and the verdict printed.
NAMED_MISTAKES = """\
import contextlib as _contextlib, io as _io, json as _json
_verdicts = {{}}
for _hint, _mistake in ({check}.keywords["mistakes"] or {{}}).items():
    with _contextlib.redirect_stdout(_io.StringIO()) as _printed:
        {check}(_mistake)
    _verdicts[_hint] = _printed.getvalue()
print(_json.dumps(_verdicts))
"""

# Run in the kernel before the page, by the tests only (the notebook a reader downloads
# has no such cell): every torch.allclose the page calls keeps how close it came to its
# tolerance, the largest |a - b| / (atol + rtol |b|), which WATCHED then reads back.
WATCH = """\
def _watch_allclose():
    import sys
    import torch

    allclose, calls = torch.allclose, []

    def watched(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        result = allclose(input, other, rtol=rtol, atol=atol, equal_nan=equal_nan)
        with torch.no_grad():
            a, b = torch.broadcast_tensors(input.detach().double(), other.detach().double())
            gap, budget = (a - b).abs(), atol + rtol * b.abs()
            ratio = torch.where(gap == 0, 0.0, gap / budget).max().item() if a.numel() else 0.0
            largest = gap.max().item() if a.numel() else 0.0
        caller = sys._getframe(1)
        calls.append([caller.f_code.co_filename, caller.f_lineno, ratio, largest, atol, rtol,
                      bool(result)])
        return result

    watched.calls = calls
    torch.allclose = watched


_watch_allclose()
del _watch_allclose
"""
# Run in the kernel right after the page: the CPU seconds the kernel has used since it
# started (its start, the page, and any child process it waited for), on every thread.
CPU_SECONDS = """\
import resource as _resource
print(sum(getattr(_resource.getrusage(who), kind)
          for who in (_resource.RUSAGE_SELF, _resource.RUSAGE_CHILDREN)
          for kind in ("ru_utime", "ru_stime")))
"""
WATCHED = """\
import json as _json, torch as _torch
print(_json.dumps([[get_ipython().compile.format_code_name(call[0]), *call[1:]]
                   for call in _torch.allclose.calls]))
"""


class BlockFailure(Exception):
    """A block raised, or printed something other than its expected output."""


class BlockSkipped(Exception):
    """A block that did not run: skipped by its page, or after an earlier block failed."""


@dataclass
class PageRun:
    page: Page
    workdir: Path
    configuration: str = "as-is"
    seconds: float = 0.0  # the whole notebook, kernel start included
    cpu_seconds: float = 0.0  # the kernel's, start included, on all its threads
    printed: dict[int, str] = field(default_factory=dict)  # block line -> what it printed
    failed_at: Block | None = None  # the first block that raised; later blocks did not run
    failure: str = ""
    # block line -> its torch.allclose calls with less than the configuration's required
    # margin (tools/numerics.py): they fail the block
    thin_margins: dict[int, list[str]] = field(default_factory=dict)
    # block line -> those with that margin but less than MARGIN: they pass, reported
    narrow_margins: dict[int, list[str]] = field(default_factory=dict)
    # (exercise heading's line, what ran in place of its starter) -> its check's verdict
    verdicts: dict[tuple[int, str], str] = field(default_factory=dict)
    # exercise heading's line -> each mistake its checker knows -> the check's verdict on it
    named_verdicts: dict[int, dict[str, str]] = field(default_factory=dict)

    def check(self, block: Block) -> str:
        """What the block printed; raises BlockFailure or BlockSkipped."""
        if block.skip_reason is not None:
            raise BlockSkipped(f"{block.where}: {block.skip_reason}")
        if block.syntax != "python":
            output = _run_shell(block, self.workdir)
        elif self.failed_at is block:
            raise BlockFailure(f"{self.failure}\n\nunder {describe(self.configuration)}")
        elif block.lineno not in self.printed:
            raise BlockSkipped(
                f"{block.where}: not run, an earlier block of this page failed "
                f"({self.failed_at.where if self.failed_at else 'the set-up cell'})"
            )
        else:
            output = self.printed[block.lineno]
        check_output(block, output, self.configuration)
        if block.lineno in self.thin_margins:
            raise BlockFailure(
                "\n".join(self.thin_margins[block.lineno])
                + f"\n\nunder {describe(self.configuration)}, on {cpu_name()}; a page's "
                f"comparisons keep a {required_margin(self.configuration):g}× margin under it "
                "(docs/contributing.md, what a page may print)"
            )
        return output

    @property
    def passed(self) -> bool:
        return self.failed_at is None and all(
            normalise(self.printed.get(b.lineno, "")) == normalise(b.expected_output or "")
            for b in self.page.cells
        )


def run_page(page: Page, configuration: str = "as-is", workdir: Path | None = None) -> PageRun:
    """Execute the page's notebook top to bottom under a numeric configuration
    (tools/numerics.py), stopping at the first block that raises."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    run = PageRun(page, workdir or Path(tempfile.mkdtemp(prefix="tbt-page-")), configuration)
    if not page.cells:
        return run
    notebook = to_notebook(page, None)  # links in the prose run nothing
    code_cells = [c for c in notebook.cells if c.cell_type == "code"]
    blocks = dict(zip(map(id, code_cells[1:]), page.cells, strict=True))  # after the set-up
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(run.workdir)}},
        **KERNEL_OPTIONS,
    )
    started = time.perf_counter()
    with client.setup_kernel(env=environment(configuration)):
        _execute_hidden(client, notebook, WATCH)
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
        run.cpu_seconds = float(_execute_hidden(client, notebook, CPU_SECONDS) or "nan")
        run.thin_margins, run.narrow_margins = _margins(
            _execute_hidden(client, notebook, WATCHED),
            notebook,
            blocks,
            required_margin(configuration),
        )
        if run.failed_at is None:
            run.verdicts, run.named_verdicts = _exercise_verdicts(client, notebook, page)
    if run.failed_at is not None:
        run.printed.pop(run.failed_at.lineno, None)
    return run


def _execute_hidden(client, notebook, source: str) -> str:
    """Run `source` in the page's kernel, outside the notebook; what it printed, or "" if
    it raised."""
    printed, why = _execute_hidden_or_why(client, notebook, source)
    return "" if why else printed


def _execute_hidden_or_why(client, notebook, source: str) -> tuple[str, str]:
    """`_execute_hidden`, and why `source` stopped early ("" when it ran to its end)."""
    from nbclient.exceptions import CellExecutionError

    cell = nbformat.v4.new_code_cell(source)
    notebook.cells.append(cell)
    try:
        client.execute_cell(cell, len(notebook.cells) - 1, store_history=False)
        return _stdout(cell), ""
    except CellExecutionError as error:
        return _stdout(cell), f"it raised {error.ename}: {error.evalue}"
    except Exception as error:  # the kernel died or timed out: the page's failure says why
        return "", f"the kernel failed: {type(error).__name__}: {error}"
    finally:
        notebook.cells.pop()


def _exercise_verdicts(client, notebook, page: Page):
    """After the page: each exercise's solution and classic mistakes, each run in place of
    the starter and followed by the exercise's check; what the check printed, after why
    the code stopped if it raised (a check never raises: its verdict is then missing).
    Then the verdict of each checker on each mistake it knows (NAMED_MISTAKES)."""
    verdicts, named_verdicts = {}, {}
    for exercise in exercises(page):
        for label, block, _ in exercise.variants() if exercise.check is not None else ():
            printed, why = _execute_hidden_or_why(
                client, notebook, f"{block.code}\n{exercise.check_code}"
            )
            verdicts[exercise.lineno, label] = f"({why})\n{printed}" if why else printed
        for name in exercise.checkers:
            printed, why = _execute_hidden_or_why(
                client, notebook, NAMED_MISTAKES.format(check=name)
            )
            try:
                named = json.loads(printed)
            except ValueError:
                named = {f"(the mistakes of {name})": f"({why or 'no verdicts'})\n{printed}"}
            named_verdicts.setdefault(exercise.lineno, {}).update(named)
    return verdicts, named_verdicts


def _margins(watched: str, notebook, blocks, required: float):
    """The torch.allclose calls that hold with less than MARGIN to spare (True within
    1/MARGIN of the tolerance, or False by less than MARGIN times it), by block line: those
    under the `required` margin, which fail, and the rest, which pass and are reported."""
    by_count = {c.get("execution_count"): blocks.get(id(c)) for c in notebook.cells}
    thin: dict[int, list[str]] = {}
    narrow: dict[int, list[str]] = {}
    for code_name, lineno, ratio, largest, atol, rtol, result in json.loads(watched or "[]"):
        block = by_count.get(int(code_name[1][3:-1])) if code_name else None
        margin = (1 / ratio if ratio else math.inf) if result else ratio
        if block is None or margin >= MARGIN:
            continue
        file, line = (
            block.origins[lineno - 1] if 0 < lineno <= len(block.origins) else (block.where, lineno)
        )
        how = (
            f"is True, with a difference at {ratio:.0%} of its tolerance"
            if result
            else f"is False, by only {ratio:.1f}× its tolerance"
        )
        found = thin if margin < required else narrow
        found.setdefault(block.lineno, []).append(
            f"{file}:{line}: torch.allclose {how}: less than a {MARGIN}× margin (largest "
            f"difference {largest:.1e}, atol={atol:g}, rtol={rtol:g})"
        )
    return thin, narrow


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
    printed = _execute_hidden(client, notebook, FRAMES)
    return json.loads(printed) if printed else []  # the kernel died: no frames to show


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
        block.code,
        shell=True,
        capture_output=True,
        text=True,
        cwd=workdir,
        executable="/bin/bash" if block.syntax == "bash" else None,
    )
    if result.returncode != 0:
        raise BlockFailure(
            f"{block.where}: the {block.syntax} block exited with status "
            f"{result.returncode}\n{result.stdout}{result.stderr}"
        )
    return result.stdout


def check_output(block: Block, output: str, configuration: str = "as-is") -> None:
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
    shown, printed = normalise(expected).splitlines(), normalise(output).splitlines()
    first = next(
        (i for i, (a, b) in enumerate(zip(shown, printed, strict=False)) if a != b),
        min(len(shown), len(printed)),
    )
    diff = difflib.unified_diff(
        shown,
        printed,
        fromfile=f"shown on the page ({display(block.page)}:{block.expected_lineno})",
        tofile=f"printed by the block ({block.where})",
        lineterm="",
    )
    raise BlockFailure(
        f"{block.where}: under {describe(configuration)}, the block's output differs from "
        f"the page's from its line {first + 1} on\n"
        f"  shown:   {shown[first] if first < len(shown) else '(nothing)'}\n"
        f"  printed: {printed[first] if first < len(printed) else '(nothing)'}\n\n"
        + "\n".join(diff)
    )


def normalise(text: str) -> str:
    """Trailing spaces and blank lines at the end are invisible on the page."""
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())
