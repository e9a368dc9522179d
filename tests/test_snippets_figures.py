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


def test_the_same_code_draws_the_same_bytes(drawn, tmp_path):
    figures.build(tmp_path, force=True)
    for name in figures.REGISTRY:
        assert (drawn / name).read_bytes() == (tmp_path / name).read_bytes(), name


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
