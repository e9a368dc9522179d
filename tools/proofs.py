"""The proof table: every equality the book proves, with what the last test run measured.

The parity tests prove each equality with `prove` (tests/plugins/proofs.py): the component
written by hand, the reference it is held to, the inputs and the tolerance. The site
build reads those calls from the tests' source, without running them (`equalities`), so
every build shows every equality, grouped by the chapter its test checks. A test run
records each proof with the largest difference it measured, under each numeric
configuration that ran (tools/numerics.py); where the record holds a test's proofs, the
table shows them, measured, with the machine and the versions that measured them, and
elsewhere says "not measured here". Nothing in it is typed by hand.

The tests are read, not imported: importing them would import torch and transformers
into the build. A `prove(...)` call's arguments are evaluated from what the source
fixes: literals, the module's and tests/inputs.py's constants, the test's own simple
assignments and its `pytest.mark.parametrize` values (one row for each), and for a helper
that takes `prove`, the arguments each test passes it. What only a run knows (a loop
over tensors, a tolerance computed from a measurement) shows as "…".
"""

from __future__ import annotations

import ast
import fcntl
import itertools
import os
from dataclasses import dataclass
from pathlib import Path

from snippets.book import CACHE, REPO_ROOT, cpu_name, nav, read_json, write_json
from tools.numerics import CONFIGURATIONS, MARGIN, current
from tools.pages import DOCS, included_modules
from tools.scaffold import page_test_file

PROOFS = CACHE / "proofs.json"
TESTS = REPO_ROOT / "tests"
MARKER = "<!-- the proof table -->"  # where docs/proofs.md shows it
UNKNOWN = "…"
NOT_MEASURED = "not measured here"


def clear(proofs: Path = PROOFS) -> None:
    """Start a new record: the whole test run is about to measure every proof again."""
    proofs.unlink(missing_ok=True)


def record(
    component: str,
    reference: str,
    inputs: str,
    tolerance: float,
    difference: float,
    proofs: Path = PROOFS,
    *,
    test: str = "",
) -> None:
    """Add one measurement of a proof, under the configuration this process runs under.
    `test` is where `prove` was called: "tests/test_x.py::function"."""
    import torch
    import transformers

    proofs.parent.mkdir(parents=True, exist_ok=True)
    # the pytest-xdist workers of one run, and the runs under each configuration, write here
    with open(proofs.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        recorded = read_json(proofs)
        recorded.setdefault(
            "machine",
            {
                "cpu": cpu_name(),
                "cores": os.cpu_count(),
                "torch": torch.__version__.split("+")[0],
                "transformers": transformers.__version__,
            },
        )
        row = recorded.setdefault("proofs", {}).setdefault(
            f"{component} | {inputs}",
            {
                "component": component,
                "reference": reference,
                "inputs": inputs,
                "tolerance": tolerance,
                "differences": {},
            },
        )
        row["tolerance"] = tolerance
        row["test"] = test
        configuration = current()
        row["differences"][configuration] = max(
            difference, row["differences"].get(configuration, 0.0)
        )
        write_json(proofs, recorded)


# ---------------------------------------------------------------- the equalities, read


@dataclass(frozen=True)
class Equality:
    """One row of a `prove(...)` call, as the tests' source gives it."""

    test: str  # where prove is called: "tests/test_x.py::function"
    line: int
    component: str
    reference: str
    inputs: str
    tolerance: str  # "1e-05", or what the source leaves to the run, e.g. "20 × …"


SAFE_BUILTINS = {
    f.__name__: f
    for f in (
        abs,
        bool,
        dict,
        enumerate,
        float,
        int,
        len,
        list,
        max,
        min,
        range,
        repr,
        reversed,
        round,
        set,
        sorted,
        str,
        sum,
        tuple,
        zip,
    )
}


_SEEN: dict[int, tuple] = {}  # id(node) -> (node, what was worked out from it), per reading


def _once(node, work):
    """`work(node)`, worked out once for each node of one reading of the tests."""
    if id(node) not in _SEEN or _SEEN[id(node)][0] is not node:
        _SEEN[id(node)] = (node, work(node))
    return _SEEN[id(node)][1]


def _evaluate(node: ast.expr, names: dict):
    code = _once(node, lambda n: compile(ast.Expression(n), "<test>", "eval"))
    return eval(code, {"__builtins__": SAFE_BUILTINS}, dict(names))


def _text(node: ast.expr | None, names: dict) -> str:
    """A string argument as far as the source fixes it; "…" for the rest."""
    if node is None:
        return UNKNOWN
    try:
        value = _evaluate(node, names)
        return value if isinstance(value, str) else f"{value:.0e}"
    except Exception:  # anything a run computes
        pass
    if isinstance(node, ast.JoinedStr):
        return "".join(
            part.value if isinstance(part, ast.Constant) else _text(part, names)
            for part in node.values
        )
    if isinstance(node, ast.FormattedValue):
        try:
            spec = _text(node.format_spec, names) if node.format_spec else ""
            return format(_evaluate(node.value, names), spec)
        except Exception:
            return UNKNOWN
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return (_text(node.left, names) + _text(node.right, names)).replace(UNKNOWN * 2, UNKNOWN)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return f"{_number(node.left, names)} × {_number(node.right, names)}"
    return UNKNOWN


def _number(node: ast.expr, names: dict) -> str:
    try:
        return f"{_evaluate(node, names):g}"
    except Exception:
        return UNKNOWN


def _assigned(statements: list[ast.AST], names: dict, before: int = 10**9) -> dict:
    """`names` after the simple assignments among `statements` above line `before`; a name
    bound any other way (a loop, unpacking, `with ... as`) is unknown from there on."""
    names = dict(names)
    for line, name, value in _once(statements, _bindings):
        if line >= before:
            break
        try:
            names[name] = _evaluate(value, names)
        except Exception:  # `value` is None, or needs what only a run has
            names.pop(name, None)
    return names


def _bindings(statements: list[ast.AST]) -> list[tuple[int, str, ast.expr | None]]:
    """(line, name, value) for each name bound in `statements`, in order; the value of a
    simple assignment, None for a name bound any other way."""
    nodes = sorted(
        (n for s in statements for n in ast.walk(s) if hasattr(n, "lineno")),
        key=lambda n: (n.lineno, n.col_offset),
    )
    simple = {
        id(n.targets[0]): n.value
        for n in nodes
        if isinstance(n, ast.Assign) and [type(t) for t in n.targets] == [ast.Name]
    }
    return [
        (n.lineno, n.id, simple.get(id(n)))
        for n in nodes
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    ]


def _parametrized(function: ast.FunctionDef, names: dict) -> list[dict]:
    """One set of names for each case of the test's `pytest.mark.parametrize`."""
    cases = [names]
    for decorator in function.decorator_list:
        if not (
            isinstance(decorator, ast.Call)
            and ast.unparse(decorator.func).endswith("mark.parametrize")
        ):
            continue
        try:
            argnames = _evaluate(decorator.args[0], names)
            argnames = (
                [a.strip() for a in argnames.split(",")]
                if isinstance(argnames, str)
                else list(argnames)
            )
            values = [v if len(argnames) > 1 else (v,) for v in _evaluate(decorator.args[1], names)]
        except Exception:  # values only a run builds
            continue
        cases = [
            {**case, **dict(zip(argnames, v, strict=True))}
            for case, v in itertools.product(cases, values)
        ]
    return cases


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
    ]


def _cases(function: ast.FunctionDef, module: ast.Module, names: dict, depth: int = 0) -> list:
    """The sets of names a function may run with: its parametrize cases for a test; for a
    helper that takes `prove`, what each test of the module passes it."""
    if function.name.startswith("test") or depth:
        return _parametrized(function, names)
    params = [a.arg for a in function.args.args]
    defaults = dict(zip(params[::-1], function.args.defaults[::-1], strict=False))
    cases = []
    for caller in (f for f in module.body if isinstance(f, ast.FunctionDef) and f is not function):
        for call in _calls(caller, function.name):
            for case in _cases(caller, module, names, depth + 1):
                there = _assigned(caller.body, case, call.lineno)
                bound = dict(names)
                arguments = [(p, v, names) for p, v in defaults.items()]
                arguments += [(p, v, there) for p, v in zip(params, call.args, strict=False)]
                arguments += [(k.arg, k.value, there) for k in call.keywords]
                for param, value, known in arguments:
                    try:
                        bound[param] = (
                            _text(value, known)
                            if isinstance(value, ast.JoinedStr | ast.Constant)
                            else _evaluate(value, known)
                        )
                    except Exception:
                        bound.pop(param, None)
                cases.append(bound)
    return cases or [names]


def _constants(path: Path, names: dict | None = None) -> tuple[ast.Module, dict]:
    tree = ast.parse(path.read_text(), filename=str(path))
    top = [s for s in tree.body if isinstance(s, ast.Assign)]
    return tree, _assigned(top, names or {})


def equalities(tests: Path = TESTS) -> list[Equality]:
    """Every equality the tests prove, read from their `prove(...)` calls, in file order."""
    _SEEN.clear()
    shared = _constants(tests / "inputs.py")[1] if (tests / "inputs.py").exists() else {}
    found: list[Equality] = []
    for path in sorted(tests.glob("test_*.py")):
        if "prove(" not in path.read_text():
            continue
        module, names = _constants(path, shared)
        for function in (n for n in ast.walk(module) if isinstance(n, ast.FunctionDef)):
            calls = [c for c in _calls(function, "prove") if len(c.args) >= 3]
            arguments = [a.arg for a in function.args.args]
            if not calls or "prove" not in arguments or "unrecorded" in arguments:
                continue  # `unrecorded`: a test of `prove` itself, which records nothing
            for call in calls:
                tolerance = next(
                    (k.value for k in call.keywords if k.arg == "atol"),
                    call.args[5] if len(call.args) > 5 else None,
                )
                for case in _cases(function, module, names):
                    here = _assigned(function.body, case, call.lineno)
                    row = Equality(
                        f"{path.relative_to(tests.parent).as_posix()}::{function.name}",
                        call.lineno,
                        *(_text(a, here) for a in call.args[:3]),
                        _text(tolerance, here),
                    )
                    if row not in found:
                        found.append(row)
    return found


# ---------------------------------------------------------------- the table


@dataclass(frozen=True)
class Group:
    """Where a test file's proofs go: its chapter, or for a snippet's tests that several
    chapters include, a group of its own after them."""

    order: tuple[int, int]  # (part, place in the part) in the nav
    part: str
    title: str
    pages: tuple[tuple[str, str], ...]  # (title, page under docs/): the chapters it checks


def groups(tests: Path = TESTS) -> dict[str, Group]:
    """Each test file's group (file name -> Group): a chapter's own tests and its aspects'
    (tests/plugins/selection.py, tests_of) go with it; a snippet's tests go with the one chapter
    that includes the snippet, or with every chapter of the first part that includes it."""
    found: dict[str, Group] = {}
    chapters: dict[str, Group] = {}  # page -> its group
    including: dict[str, list] = {}  # snippet test file -> [(part index, page)]
    for p, (part, entries) in enumerate(nav()):
        for c, (title, page) in enumerate(entries):
            chapters[page] = Group((p, c), part, title, ((title, page),))
            own = page_test_file(Path(page).with_suffix(".md").as_posix())
            for name in [own.name, *sorted(p.name for p in tests.glob(f"{own.stem}_*.py"))]:
                found.setdefault(name, chapters[page])
            if page.endswith(".md") and (DOCS / page).exists():
                for module in included_modules(DOCS / page):
                    name = f"test_snippets_{Path(module).stem}.py"
                    including.setdefault(name, []).append((p, page))
    for name, included_by in including.items():
        first = chapters[included_by[0][1]]
        pages = [chapters[page].pages[0] for p, page in included_by if p == first.order[0]]
        shared = Group((first.order[0], 1000), first.part, f"`snippets/{name[14:]}`", tuple(pages))
        found.setdefault(name, first if len(pages) == 1 else shared)
    return found


def table(proofs: Path = PROOFS, *, tests: Path = TESTS, repo_url: str = "") -> str:
    """The proof table in Markdown: every equality the tests prove, by chapter, with the
    largest difference the last run measured, or "not measured here"."""
    recorded = read_json(proofs)
    measured: dict[str, list[dict]] = {}
    for row in recorded.get("proofs", {}).values():
        if row.get("test"):  # a record from before proofs named their test is not placed
            measured.setdefault(row["test"], []).append(row)
    rows: dict[str, list[tuple[Equality, dict | None]]] = {}  # test file -> rows
    read = equalities(tests)
    call = {(e.test, e.component, e.inputs): e for e in read}  # a measured row's prove call
    shown: list[dict] = []
    for equality in read:
        file = equality.test.partition("::")[0]
        if equality.test not in measured:
            rows.setdefault(file, []).append((equality, None))
        elif not any(row["test"] == equality.test for row in shown):
            for row in sorted(measured[equality.test], key=lambda r: (r["component"], r["inputs"])):
                shown.append(row)
                called = call.get((row["test"], row["component"], row["inputs"]), equality)
                rows.setdefault(file, []).append((called, row))
    lines = (
        [_measured_by(recorded["machine"], shown)]
        if shown
        else [f"This build of the site ran no test: its measured columns say *{NOT_MEASURED}*."]
    )
    blob = f"{repo_url.rstrip('/')}/blob/main/" if repo_url else "../"
    placed = groups(tests)
    other = Group((10**6, 0), "Other tests", "Other tests", ())
    by_group: dict[Group, list[str]] = {}
    for file in rows:
        by_group.setdefault(placed.get(Path(file).name, other), []).append(file)
    part = None
    for group in sorted(by_group, key=lambda g: g.order):
        if group.part != part:
            part = group.part
            lines += ["", f"## {part}"]
        files = by_group[group]
        chapters = ", ".join(f"[{title}]({page})" for title, page in group.pages)
        tested = ", ".join(f"[{Path(f).name}]({blob}{f})" for f in files)
        lines += ["", f"### {group.title}", ""]
        if len(group.pages) == 1:
            lines += [f"[The chapter]({group.pages[0][1]}) · its tests: {tested}", ""]
        else:
            lines += [f"The code of {chapters} · its tests: {tested}", ""]
        lines += [
            '<div class="proof-table" markdown>',
            "",
            "| component | reference | inputs | tolerance | largest difference | margin |",
            "| --- | --- | --- | ---: | ---: | ---: |",
        ]
        for file in files:
            for equality, row in rows[file]:
                lines.append(_row(equality, row, f"{blob}{file}#L{equality.line}"))
        lines += ["", "</div>"]
    return "\n".join(lines)


def _measured_by(machine: dict, rows: list[dict]) -> str:
    ran = [name for name in CONFIGURATIONS if any(name in row["differences"] for row in rows)]
    return (
        f"Measured on {machine['cpu']} ({machine['cores']} cores), torch {machine['torch']}, "
        f"transformers {machine['transformers']}, under {len(ran)} numeric "
        f"configuration{'s' if len(ran) > 1 else ''}: {', '.join(f'`{n}`' for n in ran)}."
    )


def _row(equality: Equality, row: dict | None, link: str) -> str:
    if row is None:
        cells = [
            equality.component,
            equality.reference,
            equality.inputs,
            equality.tolerance,
            f"*{NOT_MEASURED}*",
            "—",
        ]
    else:
        worst = max(row["differences"].values())
        cells = [
            row["component"],
            row["reference"],
            row["inputs"],
            f"{row['tolerance']:.0e}",
            f"{worst:.1e}",
            _margin(row["tolerance"], worst),
        ]
    cells[0] = f"[{cells[0]}]({link})"
    return "| " + " | ".join(cells) + " |"


def _margin(tolerance: float, worst: float) -> str:
    """The margin column: bold under MARGIN, which only the machine as it is may pass with."""
    if not worst:
        return "exact"
    margin = tolerance / worst
    return f"{margin:,.0f}×" if margin >= MARGIN else f"**{margin:.1f}×, under {MARGIN}×**"
