"""The chapter scaffold (tools/scaffold.py): a page that passes every check as it is,
its nav entry, and a test stub, named by part and page, that fails until written."""

import shutil

import pytest

from snippets.book import REPO_ROOT
from tools.execute import run_page
from tools.exercises import exercises
from tools.exercises import problems as exercise_problems
from tools.pages import parse
from tools.scaffold import scaffold


def test_the_scaffold_makes_a_page_that_passes_and_a_stub_that_fails(tmp_path):
    shutil.copy(REPO_ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "tests").mkdir()
    page, test = scaffold("bert/new-chapter", "A new chapter", root=tmp_path)

    nav = (tmp_path / "mkdocs.yml").read_text().splitlines()
    added = nav.index("      - A new chapter: bert/new-chapter.md")
    assert ": bert/" in nav[added - 1]  # last in its part
    assert ": bert/" not in nav[added + 1]

    assert test == tmp_path / "tests" / "test_bert_new_chapter.py"
    parsed = parse(page)
    assert parsed.problems == []
    assert exercise_problems(parsed) == []
    run = run_page(parsed)
    for block in parsed.cells:
        run.check(block)
    [exercise] = exercises(parsed)
    assert run.verdicts[exercise.lineno, "the solution"].startswith("✓")
    assert "unbiased variance" in run.verdicts[exercise.lineno, "the mistake 'unbiased variance'"]

    namespace = {}
    exec(compile(test.read_text(), str(test), "exec"), namespace)
    with pytest.raises(pytest.fail.Exception, match="not written yet"):
        namespace["test_new_chapter_matches_the_reference_on_inputs_the_page_does_not_show"]()
    with pytest.raises(SystemExit, match="exists already"):
        scaffold("bert/new-chapter", "Again", root=tmp_path)


def test_pages_of_the_same_name_in_two_parts_get_two_stubs(tmp_path):
    shutil.copy(REPO_ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    (tmp_path / "tests").mkdir()
    _, first = scaffold("bert/attention-maps", "Attention maps", root=tmp_path)
    _, second = scaffold("gpt2/attention-maps", "Attention maps", root=tmp_path)
    assert (first.name, second.name) == (
        "test_bert_attention_maps.py",
        "test_gpt2_attention_maps.py",
    )
