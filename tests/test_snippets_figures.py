"""Every figure is drawn by the build (snippets/figures/), the same bytes each time, and
every one is shown, by the module of the chapter that shows it; the tour is drawn from
the nav."""

import json
import shutil

import pytest

from snippets import figures
from tools import checks
from tools.pages import DOCS, display, pages
from tools.scaffold import page_figures_file


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """Every figure, drawn from scratch into a folder of its own."""
    folder = tmp_path_factory.mktemp("figures")
    assert sorted(figures.build(folder, force=True)) == sorted(figures.REGISTRY)
    return folder


def test_the_same_code_draws_the_same_bytes(drawn):
    """Each figure drawn here is the bytes of the one in docs/figures/, which another
    process drew: the set-up, or the build() below for a figure whose code changed since."""
    figures.build()
    for name in figures.REGISTRY:
        assert (drawn / name).read_bytes() == (figures.OUT_DIR / name).read_bytes(), name


def test_only_changed_figures_are_redrawn(drawn, tmp_path):
    shutil.copytree(drawn, tmp_path, dirs_exist_ok=True)
    assert figures.build(tmp_path) == []
    manifest_path = tmp_path / figures.MANIFEST
    manifest = json.loads(manifest_path.read_text())
    changed = sorted(manifest)[0]
    manifest[changed] = "code changed since"
    manifest_path.write_text(json.dumps(manifest))
    assert figures.build(tmp_path) == [changed]


def test_every_figure_drawn_is_shown_on_a_page():
    figures.all_figures()
    shown = {
        (page.parent / target).resolve()
        for page in pages()
        for _, target in checks.shown_images(page)
    }
    unshown = [name for name in figures.REGISTRY if figures.OUT_DIR / name not in shown]
    assert not unshown, f"figures no page under {display(DOCS)} shows: {unshown}"


def test_each_figure_is_drawn_by_the_module_of_its_chapter():
    """docs/PART/STEM.md's figures live in snippets/figures/PART_STEM.py, named like the
    page's test file; a figure two pages show lives with the first of them in the nav."""
    from snippets.book import nav

    first_shown_by = {}
    for _, entries in nav():
        for _, page in entries:
            if page.endswith(".md"):
                for _, target in checks.shown_images(DOCS / page):
                    shown = ((DOCS / page).parent / target).resolve()
                    first_shown_by.setdefault(shown, page)
    misplaced = {}
    for name, fig in figures.all_figures().items():
        page = first_shown_by.get(figures.OUT_DIR / name)
        if page is None or "/" not in page:  # unshown (tested above), or a top-level page's
            continue
        module = fig.draw.__module__.removeprefix(f"{figures.__name__}.")
        expected = page_figures_file(page).stem
        if module != expected:
            misplaced[name] = (
                f"drawn in {module}.py, shown first by {page}: move it to {expected}.py"
            )
    assert not misplaced, misplaced


def test_a_change_in_a_private_module_redraws_every_figure(tmp_path, monkeypatch):
    """Code that figures of several chapters share lives in private modules (`_*.py`),
    which every figure's fingerprint hashes."""
    assert {path.name for path in figures.private_modules()} >= {"_flow.py", "_minilm.py"}
    shared = tmp_path / "_shared.py"
    monkeypatch.setattr(figures, "private_modules", lambda: [shared])
    shared.write_text("COLOUR = 1\n")
    before = {name: fig.fingerprint() for name, fig in figures.all_figures().items()}
    shared.write_text("COLOUR = 2\n")
    assert [n for n, fig in figures.REGISTRY.items() if fig.fingerprint() == before[n]] == []


def test_the_tour_shows_every_part_of_the_nav_and_every_chapter_in_it():
    from snippets.book import parts
    from snippets.figures.tour import rows

    drawn = [(title, [page for _, page, _ in boxes]) for title, boxes in rows()]
    assert drawn == [(title, [page for _, page in chapters]) for title, chapters in parts()]


def test_a_fresh_result_draws_what_the_kept_file_draws(tmp_path, monkeypatch):
    """computed_once gives a fresh result as it reads the kept file back (keys sorted, tuples
    as lists), so that the first draw and every later one are the same figure."""
    from snippets import book

    monkeypatch.setattr(book, "CACHE", tmp_path)
    fresh = book.computed_once("run", [b"code"], lambda: {"second": [(1, 2.5)], "first": 1})
    kept = book.computed_once("run", [b"code"], lambda: pytest.fail("computed again"))
    assert fresh == kept == {"first": 1, "second": [[1, 2.5]]}
    assert list(fresh) == list(kept) == ["first", "second"]
