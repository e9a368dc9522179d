"""Every page in a real browser: headless Chromium driven by Playwright.

Debian's Chromium is used as it is (no browser download): set CHROMIUM to use
another binary. A screenshot of each page is saved under artifacts/screenshots/.

The local server compresses text with gzip, as GitHub Pages, where the site is
published, does: the budget is on the bytes a reader's browser really receives.
artifacts/page-sizes.json records those and, beside them, the uncompressed sizes.
"""

import functools
import gzip
import http.server
import io
import os
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest
from playwright.sync_api import sync_playwright

from snippets.book import REPO_ROOT, read_json, write_json
from tools.pages import DOCS, LABS, display, pages, site_path

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOTS = REPO_ROOT / "artifacts" / "screenshots"
PAGE_SIZES = REPO_ROOT / "artifacts" / "page-sizes.json"
BUDGET = 1_000_000  # bytes a page may transfer, figures, scripts and search index included
# what GitHub Pages serves compressed (images such as PNG are compressed already)
COMPRESSED = {".html", ".css", ".js", ".json", ".svg", ".xml", ".txt", ".map", ".ipynb"}
# flags that keep Chromium from calling home: this machine has no network, and pages must
# make no request to any host but the one serving them
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def server(built_site):
    handler = functools.partial(QuietHandler, directory=str(built_site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def send_head(self):
        path = Path(self.translate_path(self.path))
        if path.is_dir() and self.path.split("?")[0].endswith("/"):
            path = path / "index.html"
        accepts_gzip = "gzip" in self.headers.get("Accept-Encoding", "")
        if not (accepts_gzip and path.is_file() and path.suffix in COMPRESSED):
            return super().send_head()
        body = gzip.compress(path.read_bytes(), mtime=0)
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).is_file():
        pytest.fail(
            f"Chromium not found at {CHROMIUM}: `apt-get install chromium`, or set CHROMIUM"
        )
    PAGE_SIZES.unlink(missing_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def tab(browser, server):
    context = browser.new_context(
        viewport={"width": 1280, "height": 900},
        permissions=["clipboard-read", "clipboard-write"],
    )
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.problems = []
    page.on("console", lambda m: m.type == "error" and page.problems.append(f"console: {m.text}"))
    page.on("pageerror", lambda error: page.problems.append(f"script error: {error}"))
    page.on("request", lambda r: _check_host(r.url, server, page.problems))
    page.transferred = {}
    page.on("requestfinished", lambda r: page.transferred.update({r.url: r.sizes()}))
    yield page
    context.close()


def _check_host(url, server, problems):
    if urlparse(url).scheme in {"http", "https"} and not url.startswith(server):
        problems.append(f"request to another host: {url}")


@pytest.mark.parametrize("source", pages() + sorted(LABS.glob("*.py")), ids=display)
def test_page_works_in_a_browser(tab, server, built_site, source):
    where = display(source)
    tab.goto(server + site_path(source), wait_until="networkidle")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=SCREENSHOTS / f"{where.replace('/', '_')}.png", full_page=True)
    assert not tab.problems, f"{where}: " + "; ".join(tab.problems)
    _check_budget(where, tab.transferred, built_site)

    unrendered = tab.evaluate(
        """() => [...document.querySelectorAll('article math')].filter(m => {
                const box = m.getBoundingClientRect();
                return !getComputedStyle(m).display.includes('math') || !box.width || !box.height;
            }).length"""
    )
    assert unrendered == 0, f"{where}: {unrendered} formulas are not rendered as MathML"

    scrolling = tab.evaluate(
        """() => [...document.querySelectorAll('article pre')]
            .filter(pre => pre.scrollWidth > pre.clientWidth + 1)
            .map(pre => pre.innerText.split('\\n')
                .reduce((a, b) => (b.length > a.length ? b : a)))"""
    )
    assert not scrolling, (
        f"{where}: {len(scrolling)} code blocks scroll sideways at 1280 px; the widest line "
        f"of the first: {scrolling[0]!r}"
    )

    copy_buttons = tab.locator("article .md-clipboard")
    if copy_buttons.count():
        copy_buttons.first.click(force=True)
        copied = tab.evaluate("navigator.clipboard.readText()")
        shown = tab.locator("article pre code").first.inner_text()
        assert copied.strip() == shown.strip(), f"{where}: the copy button copied {copied!r}"


# the same template and the same search index serve every page: checked on the home page
# and on a chapter with code, math and figures
@pytest.mark.parametrize(
    "source", [DOCS / "index.md", DOCS / "bert" / "self-attention.md"], ids=display
)
def test_the_colour_toggle_and_search_work(tab, server, source):
    where = display(source)
    tab.goto(server + site_path(source), wait_until="networkidle")
    scheme = "document.body.getAttribute('data-md-color-scheme')"
    before = tab.evaluate(scheme)
    tab.locator("form[data-md-component=palette] label:visible").first.click()
    assert tab.evaluate(scheme) != before, f"{where}: the light/dark toggle changed nothing"

    search = tab.locator("input.md-search__input")
    search.click()
    search.press_sequentially("attention")  # Material searches on key events, not on fill()
    results = tab.locator(".md-search-result__item")
    results.first.wait_for(timeout=10_000)
    assert results.count() > 0, f"{where}: search found nothing for 'attention'"


def _check_budget(where, transferred, site):
    total = sum(s["responseBodySize"] + s["responseHeadersSize"] for s in transferred.values())
    uncompressed = sum(_served_file(url, site).stat().st_size for url in transferred)
    sizes = read_json(PAGE_SIZES)
    sizes[where] = {"transferred": total, "uncompressed": uncompressed}
    write_json(PAGE_SIZES, sizes)
    heaviest = sorted(transferred, key=lambda u: -transferred[u]["responseBodySize"])[:3]
    assert total <= BUDGET, f"{where}: transfers {total:,} bytes (budget {BUDGET:,}): {heaviest}"


def _served_file(url, site):
    path = Path(site) / urlparse(url).path.lstrip("/")
    return path / "index.html" if path.is_dir() else path


# the lowest contrast between text and background that WCAG allows for body text (AA)
READABLE_CONTRAST = 4.5


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("lab", sorted(LABS.glob("*.py")), ids=display)
def test_a_lab_is_readable_in_both_colour_schemes(browser, server, lab, scheme):
    """Material follows the reader's system scheme on a first visit; mkdocs-jupyter's cells
    must follow it too. Each code cell and each output, as screenshotted, must contrast
    with its background."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
    tab = context.new_page()
    tab.goto(server + site_path(lab), wait_until="networkidle")
    expected = {"light": "default", "dark": "slate"}[scheme]
    assert tab.evaluate("document.body.getAttribute('data-md-color-scheme')") == expected
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=SCREENSHOTS / f"{display(lab).replace('/', '_')}-{scheme}.png")
    boxes = {
        "code cell": tab.locator("article .jp-InputArea .highlight-ipynb pre"),
        "output": tab.locator("article .jp-OutputArea-output pre"),
    }
    for kind, locator in boxes.items():
        assert locator.count(), f"{display(lab)}: no {kind} on the page"
        for number in range(locator.count()):
            element = locator.nth(number)
            element.scroll_into_view_if_needed()
            ratio = contrast(element.screenshot())
            assert ratio >= READABLE_CONTRAST, (
                f"{display(lab)}, {scheme}: {kind} {number + 1} has contrast {ratio:.1f} "
                f"(at least {READABLE_CONTRAST} to read)"
            )
    context.close()


def contrast(png: bytes) -> float:
    """WCAG contrast ratio between a screenshot's background (its commonest colour) and its
    text (the 1 % of pixels furthest from that in luminance, so anti-aliased edges do not
    count)."""
    import numpy as np
    from PIL import Image

    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=float) / 255
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    luminance = (linear @ [0.2126, 0.7152, 0.0722]).ravel()
    levels, counts = np.unique(luminance.round(3), return_counts=True)
    background = levels[counts.argmax()]
    text = luminance[
        np.abs(luminance - background) >= np.quantile(np.abs(luminance - background), 0.99)
    ]
    text_level = np.median(text)
    light, dark = max(background, text_level), min(background, text_level)
    return (light + 0.05) / (dark + 0.05)
