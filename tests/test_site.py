"""The site builds strictly, renders math itself and loads nothing from another host."""

import re
from html import unescape
from html.parser import HTMLParser
from urllib.parse import urlparse

import pytest

from snippets.book import DOCS, front_matter, nav_pages, parts
from tools import notebooks
from tools.pages import (
    LABS,
    display,
    lab_notebook_path,
    mkdocs_config,
    notebook_path,
    pages,
    parse,
    site_path,
)

# elements and attributes through which a page loads something
LOADS = {
    "script": "src",
    "img": "src",
    "iframe": "src",
    "source": "src",
    "audio": "src",
    "video": "src",
    "embed": "src",
    "object": "data",
}
LOADING_LINKS = {"stylesheet", "icon", "preload", "modulepreload", "manifest", "prefetch"}


@pytest.fixture
def site(built_site):
    return built_site


class ResourceCollector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.urls = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in LOADS and attrs.get(LOADS[tag]):
            self.urls.append(attrs[LOADS[tag]])
        if tag == "link" and LOADING_LINKS & set((attrs.get("rel") or "").split()):
            self.urls.append(attrs.get("href", ""))

    def handle_data(self, data):
        if self.lasttag == "script":  # what an inline script loads: import("..."), fetch("...")
            self.urls += re.findall(r"""\b(?:import|fetch)\(\s*["'`]([^"'`]+)""", data)


def is_remote(url):
    host = urlparse(url).hostname
    return url.startswith("//") or (host is not None and host not in {"localhost", "127.0.0.1"})


def test_pages_load_nothing_from_another_host(site):
    remote = []
    for page in site.rglob("*.html"):
        collector = ResourceCollector()
        collector.feed(page.read_text(encoding="utf-8"))
        remote += [f"{page.relative_to(site)}: {url}" for url in collector.urls if is_remote(url)]
        assert 'data-md-component="source"' not in page.read_text(encoding="utf-8")
    for stylesheet in site.rglob("*.css"):
        for url in re.findall(r"(?:url\(|@import\s+)[\"']?([^\"')\s]+)", stylesheet.read_text()):
            if is_remote(url):
                remote.append(f"{stylesheet.relative_to(site)}: {url}")
    assert not remote, "\n".join(remote)


def test_math_is_rendered_to_mathml_at_build(site):
    pages_with_math = [
        page for page in pages() if re.search(r"\\\(|\\\[", page.read_text(encoding="utf-8"))
    ]
    assert pages_with_math
    for page in pages_with_math:
        html = (site / site_path(page) / "index.html").read_text(encoding="utf-8")
        assert "<math" in html, display(page)
        assert 'class="arithmatex"' not in html, display(page)


def test_every_chapter_links_its_notebook_and_colab(site):
    for page in map(parse, pages()):
        if not notebooks.has_notebook(page):
            continue
        notebook = notebook_path(page.path)
        assert (site / notebook).is_file(), notebook
        html = (site / site_path(page.path) / "index.html").read_text(encoding="utf-8")
        to_root = "../" * site_path(page.path).count("/")
        assert f'href="{to_root}{notebook}" download' in html, page.path
        assert "colab.research.google.com/github/" in html and notebook in html, page.path


@pytest.mark.parametrize("lab", sorted(LABS.glob("*.py")), ids=display)
def test_each_lab_is_rendered_by_mkdocs_jupyter_and_links_its_notebook(site, lab):
    entry = lab.relative_to(DOCS).with_suffix(".ipynb").as_posix()
    assert entry in nav_pages(), f"{display(lab)}: add `{entry}` to the nav"
    html = (site / site_path(lab) / "index.html").read_text(encoding="utf-8")
    assert 'class="jupyter-wrapper"' in html, f"{display(lab)}: not rendered by mkdocs-jupyter"
    assert f"edit/main/docs/{lab.relative_to(DOCS).as_posix()}" in html
    assert f'<a href="{lab.stem}.ipynb" download>' in html, f"{display(lab)}: no download link"
    assert (site / lab_notebook_path(lab.stem)).is_file()
    colab = notebooks.colab_url(mkdocs_config().repo_url, lab_notebook_path(lab.stem))
    assert f'href="{colab}"' in html, f"{display(lab)}: no Colab link"


@pytest.mark.parametrize("lab", sorted(LABS.glob("*.py")), ids=display)
def test_each_lab_links_the_chapter_it_extends_and_that_chapter_links_back(site, lab):
    site_url = mkdocs_config().site_url
    collector = LinkCollector()
    collector.feed((site / site_path(lab) / "index.html").read_text(encoding="utf-8"))
    chapters = [h.removeprefix(site_url) for h in collector.hrefs if h.startswith(site_url)]
    chapters = [c for c in chapters if c and (site / c / "index.html").is_file()]
    assert chapters, f"{display(lab)}: links no chapter of the site"
    for chapter in chapters:
        back = LinkCollector()
        back.feed((site / chapter / "index.html").read_text(encoding="utf-8"))
        to_lab = "../" * chapter.count("/") + site_path(lab)
        assert to_lab in back.hrefs, f"{chapter} does not link back to {display(lab)}"


def test_no_raw_tex_in_the_navigation_the_table_of_contents_or_the_search_index(site):
    """Headings become nav, table-of-contents and search titles, where math is not
    rendered: a heading with \\( ... \\) shows its TeX source there."""
    import json

    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    raw = [doc["location"] for doc in index["docs"] if re.search(r"\\[(\[]", doc["title"])]
    assert not raw, f"headings with TeX, shown raw in the nav and search: {raw}"


def test_images_load_lazily(site):
    for page in site.rglob("*.html"):
        for tag in re.findall(r"<img\b[^>]*>", page.read_text(encoding="utf-8")):
            assert 'loading="lazy"' in tag, f"{page.relative_to(site)}: {tag[:80]}"


def test_every_page_has_an_edit_link(site):
    for page in pages():
        html = (site / site_path(page) / "index.html").read_text(encoding="utf-8")
        assert f"edit/main/docs/{page.relative_to(DOCS).as_posix()}" in html, display(page)


class LinkCollector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])


def test_every_link_in_the_built_site_resolves(site):
    """What the templates and hooks add (nav, notebook links, ...) as well as the pages."""
    parsed = {}
    for page in site.rglob("*.html"):
        parsed[page] = LinkCollector()
        parsed[page].feed(page.read_text(encoding="utf-8"))
    dead = []
    for page, links in parsed.items():
        for href in links.hrefs:
            url = urlparse(href)
            if url.scheme or href.startswith("//") or href.startswith("mailto:"):
                continue
            if url.path.startswith("/"):  # 404.html links from the root of the published site
                target = site / url.path.removeprefix(urlparse(mkdocs_config().site_url).path)
            else:
                target = (page.parent / url.path).resolve() if url.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                dead.append(f"{page.relative_to(site)}: {href} (no file)")
            elif (
                url.fragment and target.suffix == ".html" and url.fragment not in parsed[target].ids
            ):
                dead.append(f"{page.relative_to(site)}: {href} (no id {url.fragment})")
    assert not dead, "\n".join(dead)


def test_the_home_page_lists_every_chapter_of_the_nav_with_its_description(site):
    html = unescape((site / "index.html").read_text(encoding="utf-8"))
    for title, chapters in parts():
        assert f">{title}<a" in html, title
        for _, page in chapters:
            link = f'<a href="{site_path(DOCS / page)}">'
            description = front_matter(DOCS / page)["description"]
            assert re.search(f"{re.escape(link)}.*?</strong> {re.escape(description)}", html), page
