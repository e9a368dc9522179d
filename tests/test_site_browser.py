"""Every page in a real browser: headless Chromium driven by Playwright.

Debian's Chromium is used as it is (no browser download): set CHROMIUM to use
another binary. A screenshot of each page is saved under artifacts/screenshots/.

Each page is read at 1280 x 900, a laptop, and again 390 px wide, a phone.

The local server compresses text with gzip, as GitHub Pages, where the site is
published, does: the budget is on the bytes a reader's browser really receives.
artifacts/page-sizes.json records those and, beside them, the uncompressed sizes.
"""

from pathlib import Path
from urllib.parse import urlparse

import pytest

from snippets.book import REPO_ROOT, nav, read_json, write_json
from tests.plugins.browser import READABLE_CONTRAST, contrast, loaded_live_page
from tools.pages import DOCS, LABS, display, pages, site_path

SCREENSHOTS = REPO_ROOT / "artifacts" / "screenshots"
PAGE_SIZES = REPO_ROOT / "artifacts" / "page-sizes.json"
BUDGET = 1_000_000  # bytes a page may transfer, figures, scripts and search index included
PHONE = {"width": 390, "height": 844}

# the outermost elements that stick out of the viewport's right edge, where no box between
# them and the page scrolls or clips them: what makes the page wider than the screen
STICKING_OUT = """() => [...document.querySelectorAll('body *')].filter(e => {
    if (e.getBoundingClientRect().right <= innerWidth + 1) return false;
    for (let box = e.parentElement; box && box !== document.body; box = box.parentElement)
        if (getComputedStyle(box).overflowX !== 'visible'
            || box.getBoundingClientRect().right > innerWidth + 1) return false;
    return true;
}).map(e => `<${e.localName} class="${e.className}"> ${e.textContent.trim().slice(0, 40)}`)"""


@pytest.fixture(scope="module", autouse=True)
def _fresh_page_sizes():
    PAGE_SIZES.unlink(missing_ok=True)


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

    # the element that scrolls: in Material, the `code` inside a `pre` (overflow: auto);
    # in a lab, mkdocs-jupyter's `pre` itself
    scrolling = tab.evaluate(
        """() => [...document.querySelectorAll('article pre, article pre > code')]
            .filter(box => box.scrollWidth > box.clientWidth + 1)
            .map(box => box.innerText.split('\\n')
                .reduce((a, b) => (b.length > a.length ? b : a)))"""
    )
    assert not scrolling, (
        f"{where}: {len(scrolling)} code blocks scroll sideways at 1280 px; the widest line "
        f"of the first: {scrolling[0]!r}"
    )

    scrolling_math = tab.evaluate(
        """() => [...document.querySelectorAll('article math[display="block"]')]
            .filter(m => {
                const style = getComputedStyle(m), scrolls = (o) => /auto|scroll/.test(o);
                return (scrolls(style.overflowX) && m.scrollWidth > m.clientWidth + 1)
                    || (scrolls(style.overflowY) && m.scrollHeight > m.clientHeight + 1);
            })
            .map(m => m.textContent.trim().slice(0, 60))"""
    )
    assert not scrolling_math, (
        f"{where}: {len(scrolling_math)} display formulas scroll at 1280 px; the first: "
        f"{scrolling_math[0]!r}"
    )

    # one size for every code block, in an admonition or a collapsed solution or not
    code_sizes = tab.evaluate(
        """() => [...new Set([...document.querySelectorAll('article pre > code')]
            .map(code => getComputedStyle(code).fontSize))]"""
    )
    assert len(code_sizes) <= 1, f"{where}: code blocks in {len(code_sizes)} sizes: {code_sizes}"

    unlinked = tab.evaluate(
        """() => [...document.querySelectorAll('article img[src$=".svg"]')]
            .filter(img => img.closest('a')?.href !== img.src)
            .map(img => img.getAttribute('src'))"""
    )
    assert not unlinked, f"{where}: figures that do not link to their full size: {unlinked}"

    out_of_reach = _parts_out_of_reach(tab, server)
    assert not out_of_reach, (
        f"{where}: at 1280 x 900, no link to {out_of_reach} can be clicked without scrolling"
    )

    copy_buttons = tab.locator("article .md-clipboard")
    if copy_buttons.count():
        copy_buttons.first.click(force=True)
        copied = tab.evaluate("navigator.clipboard.readText()")
        shown = tab.locator("article pre code").first.inner_text()
        assert copied.strip() == shown.strip(), f"{where}: the copy button copied {copied!r}"

    tab.set_viewport_size(PHONE)
    _check_fits_a_phone(tab, where)


def _check_fits_a_phone(tab, where):
    width = tab.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], (
        f"{where}: {width} px wide on a {PHONE['width']} px screen; what sticks out: "
        f"{tab.evaluate(STICKING_OUT)[:3]}"
    )


def _parts_out_of_reach(tab, server):
    """The parts of the nav (and its top-level pages) to which the page, as it opens, shows
    no link that can be clicked: one outside the viewport, or under another element, or
    in a sidebar scrolled past it, cannot."""

    def url(page):
        return server + site_path(DOCS / page)

    parts = []
    for title, section in nav():
        if title:
            parts.append((title, [url(page) for _, page in section]))
        else:  # the pages at the nav's top level, each one on its own
            parts += [(page_title, [url(page)]) for page_title, page in section]
    return tab.evaluate(
        """(parts) => parts.filter(([title, urls]) => ![...document.querySelectorAll('a[href]')]
            .some(a => {
                if (a.closest('article') || !urls.includes(a.href.split('#')[0])) return false;
                const box = a.getBoundingClientRect();
                const x = box.left + box.width / 2, y = box.top + box.height / 2;
                if (!box.width || x < 0 || y < 0 || x > innerWidth || y > innerHeight) return false;
                const hit = document.elementFromPoint(x, y);
                return hit === a || a.contains(hit);
            })).map(([title]) => title)""",
        parts,
    )


def test_the_live_generation_page_fits_a_phone(browser, server):
    """The page draws its table and the generated text only once the model has run: the
    widths of both are checked with the text the Generate button writes."""
    tab = loaded_live_page(browser, server, "live/generation/")
    tab.set_viewport_size(PHONE)
    tab.click("[data-live-generate]")
    tab.wait_for_function(
        "() => { const r = document.querySelector('.live').result;"
        " return r.generated.length > 0 && !r.running; }"
    )
    _check_fits_a_phone(tab, "docs/live/generation.md, after Generate")
    tab.context.close()


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
