"""docs/live/generation.md in headless Chromium: the book's GPT-2 run by the page's
JavaScript, read back from the page and compared with `transformers` on prompts and
settings the page does not show.

The page keeps what it computed last on its element, as `result`; these tests type and
move the sliders as a reader does, wait for that result, and compare it. The tokens per
second the page measured, with the cache and without, go to artifacts/live-timings.json.
"""

import pytest
import torch
from transformers import (
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from snippets.book import REPO_ROOT, read_json, write_json
from tests.plugins.browser import assert_readable, loaded_live_page, new_tab, record_worst

pytestmark = pytest.mark.usefixtures("no_grad")

PAGE = "live/generation/"
TIMINGS = REPO_ROOT / "artifacts" / "live-timings.json"
# float32 weights on both sides, sums in float64 on the page: over these prompts, at most
# 1.1e-5 on the logits and 2.5e-6 on the probabilities (artifacts/live-differences.json)
LOGITS_ATOL = 1e-4
PROBABILITIES_ATOL = 1e-5
PROMPTS = [
    ("KING HENRY.\nOnce more unto the breach,", 1.0, 0, 1.0),
    ("Full fathom five thy father lies;", 0.7, 50, 0.9),
    ("To be, or not to be,", 1.0, 10, 1.0),
    ("What light through yonder window breaks?", 0.5, 0, 1.0),
    ("MIRANDA.\nO brave new world", 1.5, 0, 0.8),
    ("The quality of mercy", 1.0, 0, 0.5),
    ("Now is the winter of our discontent", 0.3, 5, 1.0),
    ("\n\n", 1.0, 0, 1.0),
    ("a", 2.0, 200, 0.95),
    ("Café, naïve, Zürich — and 🙂", 1.0, 0, 1.0),
    ("1234567890", 0.8, 20, 0.7),
    ("   spaces   before and after   ", 1.2, 0, 0.05),
    ("PROSPERO.\n", 1.0, 1, 1.0),
    ("Friends, Romans, countrymen, lend me your ears;", 0.9, 100, 0.9),
    ("<|endoftext|>", 1.0, 0, 1.0),
    ("If music be the food of love, play on;", 0.1, 0, 1.0),
    ("All the world's a stage,", 1.0, 3, 0.95),
    ("CALIBAN.\nThis island's mine, by Sycorax my mother,", 0.6, 40, 0.6),
    ("Et tu, Brute?", 1.95, 0, 0.3),
    ("So foul and fair a day I have not seen.", 1.0, 0, 1.0),
    ("ARIEL.\n" + "Come unto these yellow sands, " * 8, 0.8, 0, 0.9),
]
GREEDY = ["ROMEO.\n", "Full fathom five thy father lies;", "The king is dead"]


@pytest.fixture(scope="module")
def page(browser, server):
    tab = loaded_live_page(browser, server, PAGE)
    yield tab
    tab.context.close()


def set_inputs(tab, prompt, temperature=1.0, top_k=0, top_p=1.0):
    """Move the sliders, type the prompt; return the page's result once it has both."""
    tab.evaluate(
        """([t, k, p]) => {
            const set = (selector, value) => {
                const slider = document.querySelector(selector);
                slider.value = value;
                slider.dispatchEvent(new Event('input'));
            };
            set('[data-live-temperature]', t);
            set('[data-live-top-k]', k);
            set('[data-live-top-p]', p);
        }""",
        [temperature, top_k, top_p],
    )
    tab.fill("[data-live-prompt]", prompt)
    tab.wait_for_function(
        """([prompt, t, k, p]) => {
            const r = document.getElementById('live-generation').result;
            return r && r.prompt === prompt && r.settings.temperature === t
                && r.settings.topK === k && r.settings.topP === p;
        }""",
        arg=[prompt, temperature, top_k, top_p],
    )
    return tab.evaluate(
        """() => {
            const r = document.getElementById('live-generation').result;
            return { ids: r.ids, logits: Array.from(r.logits),
                     probabilities: Array.from(r.probabilities) };
        }"""
    )


@pytest.mark.parametrize(
    ("prompt", "temperature", "top_k", "top_p"), PROMPTS, ids=range(len(PROMPTS))
)
def test_next_token_probabilities_equal_the_librarys(
    page, prompt, temperature, top_k, top_p, gpt2_shakespeare, gpt2_tokenizer
):
    result = set_inputs(page, prompt, temperature, top_k, top_p)
    ids = gpt2_tokenizer(prompt)["input_ids"]
    assert result["ids"] == ids, f"{prompt!r}: ids differ"
    logits = gpt2_shakespeare(torch.tensor([ids])).logits[0, -1]
    page_logits = torch.tensor(result["logits"])
    difference = (page_logits - logits).abs().max().item()
    record_worst({"gpt2 logits": difference})
    assert difference <= LOGITS_ATOL, f"{prompt!r}: logits differ by {difference:.2e}"

    warpers = LogitsProcessorList()
    if temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(temperature))
    if top_k:
        warpers.append(TopKLogitsWarper(top_k))
    if top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p))
    # the page's own logits, so that the comparison is of the processors alone
    processed = warpers(torch.tensor([ids]), page_logits[None])[0]  # (V,): -inf where removed
    expected = processed.softmax(-1)
    # which tokens are kept, read from the scores: at a low temperature a kept token's
    # probability can underflow to 0 in float32; the page's, in float64, are kept as sent
    page_kept = torch.tensor(result["probabilities"], dtype=torch.float64) > 0
    assert torch.equal(page_kept, processed.isfinite()), f"{prompt!r}: other tokens are kept"
    probabilities = torch.tensor(result["probabilities"], dtype=torch.float32)
    difference = (probabilities - expected).abs().max().item()
    record_worst({"gpt2 probabilities after the processors": difference})
    assert difference <= PROBABILITIES_ATOL, f"{prompt!r}: probabilities differ by {difference}"
    assert not page.problems, page.problems


def generate(page):
    """Press Generate and wait until the tokens are out."""
    page.click("[data-live-generate]")
    page.wait_for_function(
        """() => {
            const r = document.getElementById('live-generation').result;
            return r.generated.length > 0 && !r.running;
        }""",
        timeout=30_000,
    )


@pytest.mark.parametrize("prompt", GREEDY)
def test_greedy_generation_gives_the_librarys_tokens(
    page, prompt, gpt2_shakespeare, gpt2_tokenizer
):
    steps = 30
    set_inputs(page, prompt)
    page.fill("[data-live-steps]", str(steps))
    page.check("[data-live-greedy]")
    generate(page)
    generated = page.evaluate("document.getElementById('live-generation').result.generated")
    ids = torch.tensor([gpt2_tokenizer(prompt)["input_ids"]])
    expected = gpt2_shakespeare.generate(ids, max_new_tokens=steps, do_sample=False)
    assert generated == expected[0, ids.shape[1] :].tolist(), f"{prompt!r}"
    cache = page.evaluate("document.getElementById('live-generation').result.cacheLength")
    assert cache == ids.shape[1] + len(generated) - 1  # the last token is drawn, not yet read
    page.uncheck("[data-live-greedy]")


def in_view(tab, selector):
    """Whether the element is inside the viewport, top to bottom."""
    return tab.locator(selector).evaluate(
        "e => { const r = e.getBoundingClientRect(); "
        "return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight; }"
    )


def test_the_speed_of_generation_is_shown_below_the_text(page):
    """Under the generated text, in view of a reader who pressed Generate, not at the top."""
    set_inputs(page, "To be, or not to be,")
    page.fill("[data-live-steps]", "40")
    page.locator("[data-live-generate]").evaluate("e => e.scrollIntoView({block: 'center'})")
    generate(page)
    speed = page.locator("[data-live-speed]")
    assert "tokens per second" in speed.inner_text()
    follows = page.locator("[data-live-text]").evaluate(
        "(text, speed) => !!(text.compareDocumentPosition(speed) "
        "& Node.DOCUMENT_POSITION_FOLLOWING)",
        speed.element_handle(),
    )
    assert follows, "the speed is shown above the generated text"
    assert in_view(page, "[data-live-speed]"), "the speed is out of view after Generate"


def test_the_page_answers_while_it_measures(page):
    """The measurement gives the browser its turn between steps: the page draws frames,
    its progress bar moves, and Stop, pressed part-way, is heard and ends it. (The check
    runs on the page's frames, and presses Stop from there, as soon as it sees the bar
    part-way: a page that froze would show no frame until the end.)"""
    set_inputs(page, "Now is the winter of our discontent")
    page.click("[data-live-measure]")
    page.wait_for_function(
        """() => {
            const bar = document.querySelector('[data-live-measuring]');
            const halfway = !bar.hidden && bar.value > 0 && bar.value < bar.max
                && !document.getElementById('live-generation').result.speed;
            if (halfway) document.querySelector('[data-live-stop]').click();
            return halfway;
        }"""
    )
    page.wait_for_function(
        "document.querySelector('[data-live-measured]').innerText.includes('stopped')"
    )
    assert page.locator("[data-live-measuring]").is_hidden()
    result = page.evaluate("Object.keys(document.getElementById('live-generation').result)")
    assert "speed" not in result


def test_the_cache_speed_up_is_measured(page):
    """Not a timed assertion: the rates are recorded for the notes, and must exist."""
    set_inputs(page, "Now is the winter of our discontent")
    page.click("[data-live-measure]")
    page.wait_for_function(
        "document.getElementById('live-generation').result.speed", timeout=60_000
    )
    assert "per second with the cache" in page.locator("[data-live-measured]").inner_text()
    speed = page.evaluate("document.getElementById('live-generation').result.speed")
    assert speed["cached"]["tokens"] == speed["uncached"]["tokens"]  # the cache changes no token
    timings = read_json(TIMINGS)
    timings["gpt2 greedy tokens per second, with the cache"] = speed["cached"]["perSecond"]
    timings["gpt2 greedy tokens per second, without the cache"] = speed["uncached"]["perSecond"]
    write_json(TIMINGS, timings)


def test_the_model_is_fetched_once_then_read_from_the_browsers_cache(browser, server):
    tab = new_tab(browser, server)
    weights = []
    tab.on("request", lambda r: ".safetensors" in r.url and weights.append(r.url))
    for _ in range(2):
        tab.goto(server + PAGE, wait_until="networkidle")
        progress = tab.locator("[data-live-loader] progress")
        tab.click("[data-live-load]")
        tab.wait_for_function("document.getElementById('live-generation').result")
        assert progress.evaluate("p => p.value === p.max && p.max > 0")
        # once loaded, the button and its full bar give way to the controls
        assert tab.locator("[data-live-load]").is_hidden()
        assert progress.is_hidden()
    assert len(weights) == 1, weights
    assert not tab.problems, tab.problems
    tab.context.close()


def test_the_number_of_tokens_is_a_box_like_the_prompts(page):
    """Drawn as the prompt's box is, not as bare text on the page."""
    looks = """e => { const s = getComputedStyle(e);
        return [s.borderTopStyle, s.borderTopWidth, s.borderTopColor, s.backgroundColor]; }"""
    steps = page.locator("[data-live-steps]").evaluate(looks)
    assert steps == page.locator("[data-live-prompt]").evaluate(looks)
    assert steps[0] != "none", steps


def test_without_javascript_the_page_says_so(browser, server):
    tab = new_tab(browser, server, java_script_enabled=False)
    tab.goto(server + PAGE)
    assert tab.locator("#live-generation").is_hidden()
    assert "JavaScript" in tab.locator("article .live-error").inner_text()
    tab.context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_page_reads_in_both_schemes(browser, server, scheme):
    tab = loaded_live_page(browser, server, PAGE, color_scheme=scheme)
    assert_readable(tab, ["[data-live-next]", "[data-live-cache]", "[data-live-status]"], scheme)
    assert not tab.problems, tab.problems
    tab.context.close()


def test_a_browser_that_cannot_run_the_code_is_told_why(browser, server):
    """An older browser fails on the tokenizer's regular expression (its `v` flag); here the
    module is not served at all, with the same result: the page's code never starts."""
    tab = new_tab(browser, server)
    tab.route("**/live/js/bpe.js", lambda route: route.abort())
    tab.goto(server + PAGE, wait_until="networkidle")
    assert "could not run" in tab.locator("#live-generation [data-live-status]").inner_text()
    tab.context.close()


@pytest.mark.parametrize(
    "probabilities",
    [[0.458, 0.229, 0.229, 0.084], [0.3, 0.2, 0.2, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25]],
    ids=["two tied", "three tied", "all tied"],
)
def test_top_p_keeps_the_tied_tokens_the_library_keeps(page, probabilities):
    """No p here falls where the tokens up to one hold exactly 1 - p: there, the kept set
    turns on rounding (torch sums in float32, the page in float64), not on the order."""
    scores = torch.tensor([probabilities]).log()  # (1, V)
    for p in (0.35, 0.6, 0.8, 0.95):
        kept = page.evaluate(
            """async ([scores, p]) => {
                const { keepTopP } = await import('../js/gpt2.js');
                return Array.from(keepTopP(Float32Array.from(scores), p), Number.isFinite);
            }""",
            [scores[0].tolist(), p],
        )
        theirs = TopPLogitsWarper(top_p=p)(None, scores.clone())[0].isfinite().tolist()
        assert kept == theirs, f"{probabilities}, p = {p}: the page keeps {kept}, not {theirs}"
