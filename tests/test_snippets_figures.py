"""Every figure is drawn by the build (snippets/figures/), the same bytes each time, and
every one is shown; the tour is drawn from the nav."""

import json
import shutil

import pytest

from snippets import figures
from tools import checks
from tools.pages import DOCS, display, pages


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


def test_the_tour_shows_every_part_of_the_nav_and_every_chapter_in_it():
    from snippets.book import nav
    from snippets.figures.tour import parts

    drawn = {title: [page for _, page, _ in chapters] for title, chapters in parts()}
    for title, entries in nav():
        chapters = [page for _, page in entries if not page.startswith(("labs/", "live/"))]
        if title and chapters:
            assert drawn.pop(title) == chapters, title
    assert not drawn, f"parts the nav does not have: {list(drawn)}"


def test_a_fresh_result_draws_what_the_kept_file_draws(tmp_path, monkeypatch):
    """computed_once gives a fresh result as it reads the kept file back (keys sorted, tuples
    as lists), so that the first draw and every later one are the same figure."""
    from snippets import book

    monkeypatch.setattr(book, "CACHE", tmp_path)
    fresh = book.computed_once("run", [b"code"], lambda: {"second": [(1, 2.5)], "first": 1})
    kept = book.computed_once("run", [b"code"], lambda: pytest.fail("computed again"))
    assert fresh == kept == {"first": 1, "second": [[1, 2.5]]}
    assert list(fresh) == list(kept) == ["first", "second"]
