"""The chapter scaffold (tools/scaffold.py), run as a contributor runs it, in a scratch
copy of the repository: it changes five files, and the chapter it writes passes every
check of its page, draws and shows its figure, and fails only its parity test stub."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from snippets.book import REPO_ROOT
from tools.scaffold import scaffold

CHAPTER = {
    "docs/bert/new-chapter.md",
    "snippets/new_chapter.py",
    "snippets/figures/bert_new_chapter.py",
    "tests/test_bert_new_chapter.py",
    "mkdocs.yml",
}


def scratch_copy(target: Path) -> Path:
    """The repository's files as they are, tracked or new, but not those git ignores, and
    the figures the set-up drew: only the new chapter's and the tour are drawn again."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (REPO_ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, target / name)
    shutil.copytree(REPO_ROOT / "docs" / "figures", target / "docs" / "figures")
    return target


def files(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in root.rglob("*")
        if path.is_file() and path.relative_to(root).parts[:2] != ("docs", "figures")
    }


def run(root: Path, *command: str) -> subprocess.CompletedProcess:
    """The command in `root`, as a contributor runs it: not inside this test run."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        command, cwd=root, env=environment, capture_output=True, text=True, timeout=600
    )


def test_make_chapter_writes_five_files_and_a_chapter_that_passes_its_checks(tmp_path):
    copy = scratch_copy(tmp_path / "repository")
    before = files(copy)
    made = run(copy, sys.executable, "-m", "tools.scaffold", "bert/new-chapter", "A new chapter")
    assert made.returncode == 0, made.stderr
    after = files(copy)
    changed = {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}
    assert changed == CHAPTER

    nav = (copy / "mkdocs.yml").read_text().splitlines()
    added = nav.index("      - A new chapter: bert/new-chapter.md")
    assert ": bert/" in nav[added - 1]  # last in its part
    assert ": bert/" not in nav[added + 1]

    drawn = run(copy, sys.executable, "-m", "snippets.figures")
    assert drawn.returncode == 0, drawn.stderr
    assert (copy / "docs" / "figures" / "bert-new-chapter.svg").is_file()

    ruff = str(Path(sys.executable).with_name("ruff"))
    new_code = sorted(name for name in CHAPTER if name.endswith(".py"))
    for check in (["check"], ["format", "--check"]):
        linted = run(copy, ruff, *check, *new_code)
        assert linted.returncode == 0, linted.stdout
    pytest_run = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q"]
    checks = run(
        copy, *pytest_run, "tests", "--page", "docs/bert/new-chapter.md", "--configuration", "as-is"
    )
    summary = checks.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"=* ?1 failed, \d+ passed in .*", summary), checks.stdout[-3000:]
    [failed] = re.findall(r"^FAILED (\S+)", checks.stdout, re.M)
    assert failed.startswith("tests/test_bert_new_chapter.py::"), failed
    assert "not written yet" in checks.stdout

    figures = run(copy, *pytest_run, "tests/test_snippets_figures.py", "-k", "shown or tour")
    assert figures.returncode == 0, figures.stdout[-3000:]


def test_a_second_chapter_of_the_same_name_needs_a_module_of_its_own(tmp_path):
    shutil.copy(REPO_ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    scaffold("bert/attention-maps", "Attention maps", root=tmp_path)
    with pytest.raises(SystemExit, match=r"snippets/attention_maps.py exists already: give"):
        scaffold("gpt2/attention-maps", "Attention maps", root=tmp_path)
    written = scaffold("gpt2/attention-maps", "Attention maps", "gpt2_maps", root=tmp_path)
    assert [path.relative_to(tmp_path).as_posix() for path in written] == [
        "docs/gpt2/attention-maps.md",
        "snippets/gpt2_maps.py",
        "snippets/figures/gpt2_attention_maps.py",
        "tests/test_gpt2_attention_maps.py",
    ]


def test_the_first_chapter_of_a_new_part_names_it_and_its_section_follows_the_last_part(
    tmp_path,
):
    shutil.copy(REPO_ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    with pytest.raises(SystemExit, match=r'PART="Part V: its title"'):
        scaffold("agents/tool-calls", "Tool calls", root=tmp_path)
    part = "Part VI: from an assistant to an agent"
    scaffold("agents/tool-calls", "Tool calls", part=part, root=tmp_path)
    scaffold("agents/memory", "Memory: what a turn keeps", root=tmp_path)
    nav = (tmp_path / "mkdocs.yml").read_text().splitlines()
    start = nav.index(f'  - "{part}":')
    assert nav[start + 1 : start + 4] == [
        "      - Tool calls: agents/tool-calls.md",
        '      - "Memory: what a turn keeps": agents/memory.md',
        "  - Labs:",
    ]
    before = (REPO_ROOT / "mkdocs.yml").read_text().splitlines()
    assert nav[start - 1] == before[before.index("  - Labs:") - 1]  # the last part's last line
