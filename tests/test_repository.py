"""The repository's shape: imports run one way, test files are named after what they
check, and the workflow file passes actionlint."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from snippets.book import DOCS, REPO_ROOT
from tools.pages import LABS, pages

# what each part of the repository may import from the project: hooks.py -> tools/ ->
# snippets/, with tests/ on top and the labs, like a reader's script, on snippets/ only
MAY_IMPORT = {
    "hooks.py": {"tools"},
    "tools": {"tools", "snippets"},
    "snippets": {"snippets"},
    "docs/labs": {"snippets"},
}
PROJECT = {"hooks", "tools", "snippets", "tests"}


def imported_names(path: Path) -> set[str]:
    """The top-level names of every module a file imports, at any depth of its code."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def sources(part: str) -> list[Path]:
    root = REPO_ROOT / part
    return [root] if root.is_file() else sorted(root.rglob("*.py"))


@pytest.mark.parametrize("part", MAY_IMPORT)
def test_imports_run_one_way_and_only_tests_import_pytest(part):
    wrong = []
    for path in sources(part):
        names = imported_names(path)
        forbidden = (names & PROJECT) - MAY_IMPORT[part]
        forbidden |= {name for name in names if name.startswith(("pytest", "_pytest"))}
        wrong += [f"{path.relative_to(REPO_ROOT)} imports {name}" for name in sorted(forbidden)]
    assert not wrong, "\n".join(wrong)


def test_the_site_builds_without_pytest():
    """The build's own modules, loaded in a fresh interpreter, bring in no test code."""
    check = (
        "import sys, hooks, tools.site, tools.execute, tools.scaffold, tools.checks\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'pytest', '_pytest', 'pytest_codeblocks', 'tests'})\n"
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", check], cwd=REPO_ROOT, check=True)


def checked_names() -> set[str]:
    """What a test file may be named after: a page (part_page), a module of snippets/
    or tools/ (snippets_x, tools_x), the book's pages as a whole (docs), the built site
    (site), the test set-up (conftest) and the repository itself."""
    names = {"docs", "site", "conftest", "repository"}
    names |= {"_".join(p.relative_to(DOCS).with_suffix("").parts) for p in pages()}
    names |= {f"labs_{lab.stem}" for lab in LABS.glob("*.py")}
    for part in ("snippets", "tools"):
        for path in (REPO_ROOT / part).rglob("*.py"):
            module = path.relative_to(REPO_ROOT / part).with_suffix("")
            if module.name != "__init__" and not module.name.startswith("__"):
                names.add("_".join((part, *module.parts)))
        names |= {f"{part}_{p.name}" for p in (REPO_ROOT / part).iterdir() if p.is_dir()}
    return {name.replace("-", "_") for name in names}


def test_each_test_file_is_named_after_what_it_checks():
    """tests/test_<path>.py, the path with docs/ dropped: test_bert_self_attention.py
    checks docs/bert/self-attention.md, test_snippets_hub.py snippets/hub.py; an aspect
    may follow, as in test_site_browser.py."""
    names = checked_names()
    stray = [
        path.name
        for path in sorted((REPO_ROOT / "tests").glob("test_*.py"))
        if not any(
            path.stem.removeprefix("test_") == name
            or path.stem.removeprefix("test_").startswith(name + "_")
            for name in names
        )
    ]
    assert not stray, f"test files named after nothing in the repository: {stray}"


def test_the_workflow_passes_actionlint():
    actionlint = Path(sys.executable).with_name("actionlint")
    workflows = sorted((REPO_ROOT / ".github" / "workflows").glob("*.yml"))
    assert workflows
    result = subprocess.run(
        [str(actionlint), "-no-color", *map(str, workflows)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# words that name a duration or a speed, in the identifiers and string keys of a comparison
# ("second" and "rate" are left out: a sentence's second half, a masking rate)
TIME_WORDS = (
    {"seconds", "ms", "millisecond", "milliseconds", "elapsed", "duration", "durations"}
    | {"time", "timing", "timings", "timer", "perf", "counter", "monotonic", "clock"}
    | {"speed", "speedup", "latency", "throughput", "rates"}
)
# the tests that compare a time: a page's CPU seconds with twice its budget, and the budgets
# written in tools/timings.py with the default
TIMED_TESTS = {
    ("test_docs.py", "test_page_within_budget"),
    ("test_tools_timings.py", "test_a_page_has_the_default_budget_or_its_own_with_a_reason"),
}


def time_comparisons(path: Path) -> list[str]:
    """file:line of each <, <=, > or >= in a test file whose sides name a duration or a speed,
    outside TIMED_TESTS."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    allowed = {
        id(node)
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef) and (path.name, function.name) in TIMED_TESTS
        for node in ast.walk(function)
    }
    found = []
    for node in ast.walk(tree):
        ordering = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
        if not isinstance(node, ast.Compare) or id(node) in allowed:
            continue
        if not any(isinstance(op, ordering) for op in node.ops):
            continue
        words = set()
        for part in ast.walk(node):
            if isinstance(part, ast.Name):
                words |= set(part.id.lower().split("_"))
            elif isinstance(part, ast.Attribute):
                words |= set(part.attr.lower().split("_"))
            elif isinstance(part, ast.Constant) and isinstance(part.value, str):
                words |= set(part.value.lower().replace(" ", "_").split("_"))
        if words & TIME_WORDS:
            found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_test_compares_a_time():
    """A time or a speed ratio fails on a busy machine: a test asserts counts, and a page
    describes its timing figure as measured on the machine that built it. The one exception
    is a page's budget, which fails only past twice it (tests/test_docs.py)."""
    found = [line for path in sources("tests") for line in time_comparisons(path)]
    assert not found, "a test compares a time or a speed:\n" + "\n".join(found)
