"""docs/live/attention.md in headless Chromium: MiniLM run by the page's JavaScript, read
back from the page and compared with `transformers` on inputs the page does not show.

The page keeps what it computed last on its element, as `result`; these tests type into
the page as a reader does, wait for that result, and compare every tensor in it. The time
the page took for its first attention is recorded in artifacts/live-timings.json.
"""

import base64
import json

import pytest
import torch

from snippets.book import DOCS, REPO_ROOT, read_json, write_json
from snippets.hub import MINILM
from tests.inputs import PAIRS, SENTENCE
from tests.plugins.browser import assert_readable, loaded_live_page, new_tab, record_worst
from tools.live import LIMIT, LIVE_MODELS

pytestmark = pytest.mark.usefixtures("no_grad")

PAGE = "live/attention/"
TIMINGS = REPO_ROOT / "artifacts" / "live-timings.json"
# float32 weights on both sides, sums in float64 on the page and in float32 in torch: over
# these inputs, at most 5.0e-6 on the hidden states and 3.5e-6 on the probabilities
# (artifacts/live-differences.json has the last run's)
ATOL = 1e-5
# a vector's length moves by no more than the length of its change, sqrt(384) * ATOL at most
# (measured: 8.6e-6, on lengths of up to 15)
NORMS_ATOL = ATOL * 384**0.5
SIXTEEN_TOKENS = "Every head of every layer is computed right here, in your browser."
SINGLES = [
    SENTENCE,
    "Ok",
    "",
    "Crème brûlée à Zürich: naïve café, façade, ÉCOLE.",
    "In 1610, 3.14159 and 42 met at 07:45 on 2026-11-26.",
    "東京 and 北京 are split into characters; emoji 🙂 are unknown.",
    "A [MASK] typed by the reader, and [SEP] too.",
    "supercalifragilisticexpialidocious" * 4 + " is longer than one hundred characters.",
    "Tabs\tand\u00a0no-break\u3000and ideographic spaces (an input holds no newline).",
    "Don't, won't, can't; it's the model's — and «quotes».",
    "the the the the the the the the the the the the the the the the",
    "Full fathom five thy father lies; of his bones are coral made. " * 12,  # 182 tokens
]
PAIRED = [
    *zip(*PAIRS, strict=True),
    ("The cat sat on the mat.", "A cat was sitting on a mat."),
    ("The cat sat on the mat.", "Stock markets fell sharply on Monday."),
    ("Where is the library?", "Where can I find books?"),
    ("I love this film.", "I hate this film."),
    ("Seven", "Seven"),
    ("A pair where the second half is long. " * 3, "Short."),
    ("Héllo wörld", "hello world"),
    ("Tempest: the isle is full of noises.", "Sounds and sweet airs, that give delight."),
]


@pytest.fixture(scope="module")
def page(browser, server):
    """The page with MiniLM loaded; its first computation is a sentence of 16 tokens."""
    tab = new_tab(browser, server)
    tab.goto(server + PAGE, wait_until="networkidle")
    tab.fill("[data-live-first]", SIXTEEN_TOKENS)
    tab.click("[data-live-load]")
    tab.wait_for_function("document.getElementById('live-attention').result", timeout=60_000)
    tab.first = tab.evaluate(
        "(({texts, first, milliseconds}) => ({texts, first, milliseconds}))"
        "(document.getElementById('live-attention').result)"
    )
    yield tab
    tab.context.close()


def computed(tab, first, second=""):
    """Type the sentences; return what the page computed for them: its tensors as torch
    tensors, flat, the rest as Python values."""
    tab.fill("[data-live-second]", second)
    tab.fill("[data-live-first]", first)
    tab.wait_for_function(
        """([a, b]) => {
            const r = document.getElementById('live-attention').result;
            return r && r.texts[0] === a && r.texts[1] === (b.trim() ? b : null);
        }""",
        arg=[first, second],
    )
    # the page's Float32Arrays come back as their bytes, in base64: as JSON lists, the
    # 2.4 million attention probabilities of a 182-token input took 33 s to read back
    result = tab.evaluate(
        """() => {
            const r = document.getElementById('live-attention').result;
            const bytes = (a) => {
                const u = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
                let s = '';
                for (let i = 0; i < u.length; i += 0x8000) {
                    s += String.fromCharCode(...u.subarray(i, i + 0x8000));
                }
                return btoa(s);
            };
            return {
                tokens: r.tokens, ids: r.ids, typeIds: r.typeIds,
                hidden: r.hidden.map(bytes), pooled: bytes(r.pooled),
                attentions: r.attentions.map((heads) => heads.map(bytes)),
                embeddings: r.embeddings.map(bytes), cosine: r.cosine, norms: r.norms,
                float32: [r.pooled, ...r.hidden, ...r.attentions.flat(), ...r.embeddings]
                    .every((a) => a instanceof Float32Array),
            };
        }"""
    )
    assert result.pop("float32"), "the page's tensors are no longer Float32Arrays"
    result["hidden"] = [float32(h) for h in result["hidden"]]
    result["pooled"] = float32(result["pooled"])
    result["attentions"] = [torch.cat([float32(a) for a in h]) for h in result["attentions"]]
    result["embeddings"] = [float32(e) for e in result["embeddings"]]
    return result


def float32(text):
    """A Float32Array's bytes, as base64, back as a flat float32 tensor."""
    return torch.frombuffer(bytearray(base64.b64decode(text)), dtype=torch.float32)


def check_against_torch(result, first, second, tokenizer, minilm):
    where = f"{first!r}" + (f" + {second!r}" if second else "")
    encoded = tokenizer(first, second or None, return_tensors="pt")
    ids = encoded["input_ids"][0].tolist()
    assert result["ids"] == ids, f"{where}: ids differ"
    assert result["typeIds"] == encoded["token_type_ids"][0].tolist(), f"{where}: token types"
    assert result["tokens"] == tokenizer.convert_ids_to_tokens(ids), f"{where}: tokens"
    out = minilm(**encoded, output_hidden_states=True, output_attentions=True)
    T, D = len(ids), minilm.config.hidden_size
    differences = {
        "hidden states": max(
            (h.view(T, D) - expected[0]).abs().max().item()
            for h, expected in zip(result["hidden"], out.hidden_states, strict=True)
        ),
        "attentions": max(
            (a.view(-1, T, T) - expected[0]).abs().max().item()
            for a, expected in zip(result["attentions"], out.attentions, strict=True)
        ),
        "pooler output": (result["pooled"] - out.pooler_output[0]).abs().max().item(),
    }
    norms = torch.stack([h[0].norm(dim=-1) for h in out.hidden_states])  # (L + 1, T)
    record_worst({f"minilm {what}": difference for what, difference in differences.items()})
    for what, difference in differences.items():
        assert difference <= ATOL, f"{where}: {what} differ by {difference:.2e} (atol {ATOL})"
    difference = (torch.tensor(result["norms"]) - norms).abs().max().item()
    record_worst({"minilm vector lengths": difference})
    assert difference <= NORMS_ATOL, f"{where}: the vectors' lengths differ by {difference:.2e}"


@pytest.mark.parametrize("first", SINGLES, ids=range(len(SINGLES)))
def test_a_sentence_gives_torchs_tensors(page, first, tokenizer, minilm):
    result = computed(page, first)
    check_against_torch(result, first, "", tokenizer, minilm)
    assert result["cosine"] is None
    assert not page.problems, page.problems


def test_the_inputs_are_more_than_twenty_and_one_is_over_100_tokens(tokenizer):
    """What docs/live/attention.md says of the inputs these tests give the page."""
    assert len(SINGLES) + len(PAIRED) > 20
    assert max(len(tokenizer(text)["input_ids"]) for text in SINGLES) > 100


@pytest.fixture(scope="module")
def sentence_transformer():
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(MINILM.repo_id, device="cpu")


@pytest.mark.parametrize(("first", "second"), PAIRED, ids=range(len(PAIRED)))
def test_a_pair_gives_torchs_tensors_and_embeddings(
    page, first, second, tokenizer, minilm, sentence_transformer
):
    result = computed(page, first, second)
    check_against_torch(result, first, second, tokenizer, minilm)
    expected = sentence_transformer.encode([first, second], convert_to_tensor=True)
    embeddings = torch.stack(result["embeddings"])
    record_worst({"minilm sentence embeddings": (embeddings - expected).abs().max().item()})
    assert torch.allclose(embeddings, expected, atol=ATOL, rtol=0), (
        f"{first!r} + {second!r}: embeddings differ by "
        f"{(embeddings - expected).abs().max().item():.2e}"
    )
    assert result["cosine"] == pytest.approx((expected[0] @ expected[1]).item(), abs=ATOL)


def test_the_first_attention_is_timed(page, tokenizer):
    """Not a timed assertion: the time is recorded for the notes, and must exist."""
    assert len(tokenizer(SIXTEEN_TOKENS)["input_ids"]) == 16
    assert page.first["texts"][0] == SIXTEEN_TOKENS and page.first["first"]
    timings = read_json(TIMINGS)
    timings["minilm first attention, 16 tokens (ms)"] = page.first["milliseconds"]
    computed(page, SIXTEEN_TOKENS + " ")
    again = page.evaluate("document.getElementById('live-attention').result.milliseconds")
    timings["minilm attention again, 16 tokens (ms)"] = again
    write_json(TIMINGS, timings)
    assert again > 0


def test_once_loaded_the_load_button_and_its_bar_are_gone(page):
    assert page.locator("[data-live-load]").is_hidden()
    assert page.locator("[data-live-loader] progress").is_hidden()
    assert page.locator("[data-live-controls]").is_visible()


def test_erf_matches_python(page):
    import math

    xs = [i / 100 for i in range(-800, 801)]
    values = page.evaluate(
        "async (xs) => { const {erf} = await import('../js/tensors.js'); return xs.map(erf); }",
        xs,
    )
    worst = max(abs(math.erf(x) - v) for x, v in zip(xs, values, strict=True))
    assert worst <= 1e-10, f"erf is {worst:.1e} from math.erf"


def test_each_model_file_is_under_the_limit(built_site):
    served = built_site / LIVE_MODELS.relative_to(DOCS)
    for folder, files in json.loads((served / "manifest.json").read_text()).items():
        for file in files:
            size = (served / folder / file["name"]).stat().st_size
            assert size == file["bytes"] <= LIMIT, f"{folder}/{file['name']}: {size:,} bytes"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_page_reads_in_both_schemes(browser, server, scheme):
    tab = loaded_live_page(browser, server, PAGE, color_scheme=scheme)
    assert_readable(tab, ["[data-live-tokens] table", "[data-live-status]"], scheme)
    assert tab.locator("[data-live-heads] canvas").count() == 12
    assert not tab.problems, tab.problems
    tab.context.close()


def test_without_javascript_the_page_says_so(browser, server):
    tab = new_tab(browser, server, java_script_enabled=False)
    tab.goto(server + PAGE)
    assert tab.locator("#live-attention").is_hidden()
    assert "JavaScript" in tab.locator("article .live-error").inner_text()
    tab.context.close()


def test_a_failed_download_is_reported(browser, server):
    tab = new_tab(browser, server)
    tab.route("**/*.safetensors*", lambda route: route.abort())
    tab.goto(server + PAGE, wait_until="networkidle")
    tab.click("[data-live-load]")
    status = tab.locator("[data-live-status].live-error")
    status.wait_for()
    assert "went wrong" in status.inner_text()
    assert tab.locator("[data-live-load]").is_enabled(), "the reader cannot try again"
    tab.context.close()
