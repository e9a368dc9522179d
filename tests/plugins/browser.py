"""Headless Chromium driven by Playwright, on the built site served as GitHub Pages serves
it (gzip included): the fixtures `server`, `browser` and `tab`; `new_tab` and
`loaded_live_page` for tests that open their own; whether text on a page is readable
(`contrast`); and `record_worst`, the live pages' largest differences from torch.
tests/test_site_browser.py checks every page with them, tests/test_live_*.py the live pages."""

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

from snippets.book import REPO_ROOT, read_json, write_json

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
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
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def tab(browser, server):
    page = new_tab(browser, server, permissions=["clipboard-read", "clipboard-write"])
    yield page
    page.context.close()


def new_tab(browser, server, **options):
    """A page in a fresh browser context at 1280 px, which records what goes wrong in it
    (`problems`: console errors, script errors, requests to other hosts) and the bytes of
    each response (`transferred`). Close it with `page.context.close()`."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, **options)
    page = context.new_page()
    # generous: a page waits while the other workers hold the cores
    page.set_default_timeout(30_000)
    page.problems = []
    page.on("console", lambda m: m.type == "error" and page.problems.append(f"console: {m.text}"))
    page.on("pageerror", lambda error: page.problems.append(f"script error: {error}"))
    page.on("request", lambda r: _check_host(r.url, server, page.problems))
    page.transferred = {}
    page.on("requestfinished", lambda r: page.transferred.update({r.url: r.sizes()}))
    return page


def _check_host(url, server, problems):
    if urlparse(url).scheme in {"http", "https"} and not url.startswith(server):
        problems.append(f"request to another host: {url}")


def loaded_live_page(browser, server, path, **options):
    """A live page (docs/live/) in a new tab, its model loaded and its first result computed:
    the page keeps what it computed last on its `.live` element, as `result`."""
    tab = new_tab(browser, server, **options)
    tab.goto(server + path, wait_until="networkidle")
    tab.click("[data-live-load]")
    tab.wait_for_function("document.querySelector('.live').result", timeout=60_000)
    return tab


# the largest difference from torch seen for each tensor the live pages compute, over every
# input the tests give them: the numbers the notes report
LIVE_DIFFERENCES = REPO_ROOT / "artifacts" / "live-differences.json"


def record_worst(differences: dict[str, float]) -> None:
    worst = read_json(LIVE_DIFFERENCES)
    for what, difference in differences.items():
        worst[what] = max(worst.get(what, 0.0), difference)
    write_json(LIVE_DIFFERENCES, worst)


# the lowest contrast between text and background that WCAG allows for body text (AA)
READABLE_CONTRAST = 4.5


def assert_readable(tab, selectors, where):
    """Each element's text, as screenshotted, contrasts with its background."""
    for selector in selectors:
        ratio = contrast(tab.locator(selector).screenshot())
        assert ratio >= READABLE_CONTRAST, f"{where}: {selector} has contrast {ratio:.1f}"


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
