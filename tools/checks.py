"""Static checks of the book's pages, each problem naming file, line and cause.

- every page is in the nav of mkdocs.yml;
- every local link points at a page or file that exists, and every #anchor at a
  heading (or id) the target really has;
- every image a page shows exists (figures are drawn by snippets/figures/);
- every chapter's front matter says what the index, the tour and the budget read from it.

`mkdocs build --strict` catches most of these too, but without a line number.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import markdown

from snippets.book import front_matter, nav_pages, parts
from tools.pages import DOCS, display, mkdocs_config

CODE = re.compile(r"```.*?```|`[^`\n]+`", re.DOTALL)  # links in code are examples
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(\s*([^)\s]+)")
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*([^)\s]+)|<img\b[^>]*\bsrc=[\"']([^\"']+)", re.DOTALL)
ID = re.compile(r"""\bid=["']([^"']+)["']""")


def _blank(match: re.Match) -> str:
    return re.sub(r"[^\n]", " ", match.group())  # keeps line numbers


def _prose(path: Path) -> str:
    return CODE.sub(_blank, path.read_text(encoding="utf-8"))


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _is_local(target: str) -> bool:
    return not re.match(r"[a-z][a-z0-9+.-]*:|/", target)


def nav_problems(page: Path, docs: Path = DOCS, nav: set[str] | None = None) -> list[str]:
    relative = page.relative_to(docs).as_posix()
    if relative in (nav_pages() if nav is None else nav):
        return []
    return [
        f"{display(page)}:1: the page is not in the nav of mkdocs.yml, so no reader can "
        f"reach it. Add `- Its title: {relative}` under its part (`make chapter` does this)."
    ]


@functools.cache
def _ids(page: Path) -> frozenset[str]:
    """The ids a page's HTML will have, rendered with the site's Markdown extensions."""
    config = mkdocs_config()
    md = markdown.Markdown(
        extensions=config.markdown_extensions, extension_configs=config.mdx_configs
    )
    return frozenset(ID.findall(md.convert(page.read_text(encoding="utf-8"))))


def link_problems(page: Path, docs: Path = DOCS) -> list[str]:
    text = _prose(page)
    problems = []
    for match in LINK.finditer(text):
        target = match.group(1)
        if not _is_local(target):
            continue
        where = f"{display(page)}:{_line(text, match.start())}"
        path_part, _, anchor = target.partition("#")
        linked = (page.parent / path_part).resolve() if path_part else page
        if not linked.is_relative_to(docs.resolve()):
            problems.append(f"{where}: link to {target}, outside docs/: the site will not have it")
        elif _rendered_lab(linked):
            continue  # its anchors are checked in the built site
        elif not linked.exists():
            problems.append(f"{where}: dead link: {target} (no file {display(linked)})")
        elif anchor and linked.suffix == ".md" and anchor not in _ids(linked):
            problems.append(
                f"{where}: dead link: {target} ({display(linked)} has no heading or id '{anchor}')"
            )
    return problems


def _rendered_lab(path: Path) -> bool:
    """The build executes the lab labs/<name>.py into labs/<name>.ipynb, its page."""
    return (
        path.suffix == ".ipynb" and path.parent.name == "labs" and path.with_suffix(".py").is_file()
    )


def shown_images(page: Path) -> list[tuple[int, str]]:
    """(line, target) for every local image a page shows."""
    text = _prose(page)
    return [
        (_line(text, m.start()), m.group(1) or m.group(2))
        for m in IMAGE.finditer(text)
        if _is_local(m.group(1) or m.group(2))
    ]


def image_problems(page: Path, figures_dir: Path) -> list[str]:
    problems = []
    for line, target in shown_images(page):
        path = (page.parent / target).resolve()
        if path.is_file():
            continue
        cause = (
            "no function in snippets/figures/ draws it (register one with @figure)"
            if path.parent == figures_dir.resolve()
            else "the file does not exist"
        )
        problems.append(f"{display(page)}:{line}: missing image {target}: {cause}")
    return problems


# what a chapter's front matter holds, and what reads it
FRONT_MATTER = r"""description: "What the chapter computes, in one sentence"  # the index lists it
tour:  # the chapter's box on the tour, docs/figures/tour.svg
  label: "Short\nname"  # two lines of about ten characters at most
  hands_on: "(B, T, C)"  # the shape of the tensor it hands to the next chapter
budget:  # only for a chapter that needs more CPU seconds than tools/timings.BUDGET
  cpu_seconds: 60
  why: "what it runs that costs them"
"""


def front_matter_problems(page: Path, docs: Path = DOCS) -> list[str]:
    """A chapter of a part must have the front matter FRONT_MATTER shows."""
    from tools.timings import BUDGET

    relative = page.relative_to(docs).as_posix()
    if relative not in {path for _, chapters in parts() for _, path in chapters}:
        return []
    meta = front_matter(page)
    tour, budget = meta.get("tour"), meta.get("budget")
    missing = []
    description = meta.get("description")
    if not isinstance(description, str):
        missing.append("a description")
    elif re.search(r"[`*<>]|\]\(", description):  # the meta description and the home page's line
        missing.append("a description in plain text, with no Markdown or HTML")
    if not isinstance(tour, dict) or set(tour) != {"label", "hands_on"}:
        missing.append("its tour box, a label and what it hands on")
    if budget is not None and (
        not isinstance(budget, dict)
        or set(budget) != {"cpu_seconds", "why"}
        or not budget["cpu_seconds"] > BUDGET
        or not budget["why"]
    ):
        missing.append(f"a budget of more than {BUDGET} CPU seconds with why, or none")
    if not missing:
        return []
    return [
        f"{display(page)}:1: the chapter's front matter lacks {'; '.join(missing)}. "
        f"It starts the page, between two lines of ---:\n{FRONT_MATTER}"
    ]
