"""Every figure is drawn by the build, the same bytes each time, and every one is shown."""

import json
import re

from snippets import figures
from tests.docs_runner import DOCS, display, pages

IMAGE = re.compile(r"!\[[^\]]*\]\(\s*([^)\s]+)|<img\b[^>]*\bsrc=[\"']([^\"']+)", re.DOTALL)
CODE = re.compile(r"```.*?```|`[^`\n]+`", re.DOTALL)  # images in code are examples, not shown


def blank(match):
    return re.sub(r"[^\n]", " ", match.group())  # keeps line numbers


def shown_images():
    """(page, line, target) for every image a page shows."""
    for page in pages():
        text = CODE.sub(blank, page.read_text(encoding="utf-8"))
        for match in IMAGE.finditer(text):
            target = match.group(1) or match.group(2)
            if not re.match(r"[a-z]+:", target):  # local files only
                line = text.count("\n", 0, match.start()) + 1
                yield page, line, target


def test_the_same_code_draws_the_same_bytes(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    assert sorted(figures.build(first, force=True)) == sorted(figures.REGISTRY)
    figures.build(second, force=True)
    for name in figures.REGISTRY:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_only_changed_figures_are_redrawn(tmp_path):
    figures.build(tmp_path)
    assert figures.build(tmp_path) == []
    manifest_path = tmp_path / figures.MANIFEST
    manifest = json.loads(manifest_path.read_text())
    changed = sorted(manifest)[0]
    manifest[changed] = "code changed since"
    manifest_path.write_text(json.dumps(manifest))
    assert figures.build(tmp_path) == [changed]
    assert figures.build(tmp_path, force=True) == sorted(figures.REGISTRY)


def test_every_image_a_page_shows_exists():
    figures.build()
    missing = [
        f"{display(page)}:{line}: shows {target}, which "
        + (
            "no function in snippets/figures/ draws (register one with @figure)"
            if (page.parent / target).resolve().parent == figures.OUT_DIR
            else "does not exist"
        )
        for page, line, target in shown_images()
        if not (page.parent / target).resolve().is_file()
    ]
    assert not missing, "\n".join(missing)


def test_every_figure_drawn_is_shown_on_a_page():
    figures.all_figures()
    shown = {(page.parent / target).resolve() for page, _, target in shown_images()}
    unshown = [name for name in figures.REGISTRY if figures.OUT_DIR / name not in shown]
    assert not unshown, f"figures no page under {display(DOCS)} shows: {unshown}"
