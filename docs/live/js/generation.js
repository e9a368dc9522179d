// The page "Generation, live": the book's GPT-2 in this browser, one token at a time.
// What it computed last is kept on the page's element as `result`, which the tests read.
import { ByteLevelBPE } from "./bpe.js";
import { GPT2, nextTokenProbabilities, pick } from "./gpt2.js";
import { escape, loadOnClick, onInput, reportErrors, say } from "./ui.js";

const root = document.getElementById("live-generation");
const $ = (selector) => root.querySelector(selector);
const prompt = $("[data-live-prompt]"), greedy = $("[data-live-greedy]");
const sliders = {
  temperature: $("[data-live-temperature]"), topK: $("[data-live-top-k]"),
  topP: $("[data-live-top-p]"),
};
let model, tokenizer, state, running = false;

say(root, "Load the model to start: the page computes everything in your browser.");
loadOnClick(root, "gpt2-shakespeare", (files) => {
  model = new GPT2(files.config, files.tensors);
  tokenizer = new ByteLevelBPE(files.tokenizer);
  say(root, "The book's GPT-2 is loaded. Type a prompt, move the sliders, generate.");
  readPrompt();
});

function settings() {
  return { temperature: Number(sliders.temperature.value), topK: Number(sliders.topK.value),
           topP: Number(sliders.topP.value) };
}

// The prompt through the model once: its cache, and the logits of the next token.
const readPrompt = reportErrors(root, () => {
  if (!model || running) return;
  const { ids, tokens } = tokenizer.encode(prompt.value);
  const room = model.config.n_positions - Number($("[data-live-steps]").value);
  if (!ids.length || ids.length > room) {
    say(root, ids.length ? `The prompt has ${ids.length} tokens; with the tokens to ` +
        `generate, the model reads at most ${model.config.n_positions}.` : "Type a prompt.",
        true);
    return;
  }
  const cache = model.emptyCache();
  const started = performance.now();
  const logits = model.forward(ids, cache);
  state = { ids, tokens, cache, logits, generated: [] };
  show(performance.now() - started);
});

// The next token's distribution, before and after the settings, and the cache's size.
function show(milliseconds) {
  const chosen = settings();
  for (const [name, slider] of Object.entries(sliders)) {
    const off = (name === "topK" && chosen.topK === 0) || (name === "topP" && chosen.topP === 1);
    $(`[data-live-value="${name}"]`).textContent = off ? "off" : slider.value;
  }
  const before = nextTokenProbabilities(state.logits, {});
  const after = nextTokenProbabilities(state.logits, chosen);
  const top = Array.from(before.keys()).sort((a, b) => before[b] - before[a]).slice(0, 10);
  $("[data-live-next]").innerHTML = "<tr><th>next token</th><th>id</th><th>probability</th>" +
    "<th>with the settings</th></tr>" + top.map((id) => `<tr><td><code>${
      escape(JSON.stringify(tokenizer.decode([id])))}</code></td><td>${id}</td>${
      cell(before[id])}${cell(after[id])}</tr>`).join("");
  // a token left by the settings can have a probability of 1e-200: it is counted apart
  const kept = after.filter((p) => p > 0).length;
  const likely = after.filter((p) => p >= 1e-3).length;
  $("[data-live-kept]").textContent = `The settings leave ${kept} of ${after.length} tokens; ` +
    `${likely} of them have a probability of 0.001 or more.`;
  const { n_layer: L, n_embd: D } = model.config, { length } = state.cache;
  $("[data-live-cache]").textContent = `KV cache: ${L} blocks × (keys, values) × ${length} ` +
    `tokens × ${D} features, ${(state.cache.bytes() / 1024).toFixed(0)} KiB of float32.`;
  $("[data-live-text]").replaceChildren(
    prompt.value, Object.assign(document.createElement("mark"), {
      textContent: tokenizer.decode(state.generated) }));
  root.result = { prompt: prompt.value, ids: state.ids, tokens: state.tokens,
                  logits: state.logits, probabilities: after, settings: chosen,
                  generated: state.generated, cacheLength: length, running, milliseconds };
}

const cell = (p) => `<td><span class="live-bar" style="width: ${(p * 6).toFixed(2)}rem">` +
  `</span> ${p.toFixed(4)}</td>`;

// --8<-- [start:generate]
// One token at a time: draw from the distribution, then run the model on that token alone;
// the cache holds the keys and values of every token before it.
async function generate() {
  const steps = Number($("[data-live-steps]").value), eos = model.config.eos_token_id;
  running = true;
  $("[data-live-speed]").textContent = "";
  const started = performance.now();
  for (let step = 0; step < steps && running; step++) {
    const token = pick(nextTokenProbabilities(state.logits, settings()), greedy.checked);
    state.generated.push(token);
    show();
    await new Promise((resolve) => setTimeout(resolve)); // let the page draw the token
    if (token === eos || step === steps - 1) break;
    state.logits = model.forward([token], state.cache); // (V): the logits of the next one
  }
  running = false;
  const seconds = (performance.now() - started) / 1000;
  show();
  $("[data-live-speed]").textContent = `${state.generated.length} tokens in ` +
    `${seconds.toFixed(2)} s, drawn as they came: ` +
    `${(state.generated.length / seconds).toFixed(1)} tokens per second.`;
}
// --8<-- [end:generate]

// Greedy tokens per second from the prompt, with the cache and without it: without, each
// step runs the model on the whole sequence again. Between steps the page gives the browser
// its turn, to draw the progress bar and to take a click on Stop; only the steps are timed.
async function measure() {
  const steps = Math.min(32, model.config.n_positions - state.ids.length);
  const progress = $("[data-live-measuring]"), line = $("[data-live-measured] span");
  Object.assign(progress, { hidden: false, max: 2 * steps, value: 0 });
  const rate = async (useCache) => {
    const ids = [...state.ids];
    let cache = model.emptyCache(), logits = model.forward(ids, cache), seconds = 0;
    for (let step = 0; step < steps && running; step++) {
      line.textContent = `Measuring ${useCache ? "with" : "without"} the cache: token ` +
        `${step + 1} of ${steps}.`;
      await new Promise((resolve) => setTimeout(resolve));
      const started = performance.now();
      ids.push(pick(logits, true));
      if (useCache) logits = model.forward(ids.slice(-1), cache);
      else logits = model.forward(ids, (cache = model.emptyCache()));
      seconds += (performance.now() - started) / 1000;
      progress.value += 1;
    }
    return { tokens: ids.slice(state.ids.length), perSecond: steps / seconds };
  };
  running = true;
  let cached, uncached, stopped;
  try {
    cached = await rate(true);
    uncached = await rate(false);
    stopped = !running;
  } finally {
    running = false;
    progress.hidden = true;
    line.textContent = "";
  }
  if (stopped) {
    line.textContent = "Measurement stopped.";
    return;
  }
  root.result.speed = { steps, cached, uncached };
  line.textContent = `${steps} greedy tokens: ${cached.perSecond.toFixed(1)} per second ` +
    `with the cache, ${uncached.perSecond.toFixed(1)} without.`;
}

onInput([prompt, $("[data-live-steps]")], readPrompt);
for (const slider of Object.values(sliders)) {
  slider.addEventListener("input", () => state && !running && show());
}
$("[data-live-generate]").addEventListener("click", reportErrors(root, async () => {
  if (!state || running) return;
  readPrompt();
  await generate();
}));
$("[data-live-stop]").addEventListener("click", () => { running = false; });
$("[data-live-measure]").addEventListener("click", reportErrors(root, async () => {
  if (state && !running) await measure();
}));
