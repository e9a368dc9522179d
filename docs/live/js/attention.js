// The page "Attention, live": the reader's sentences through MiniLM, in this browser.
// What it computed last is kept on the page's element as `result`, which the tests read.
import { MiniLM, cosine, sentenceEmbedding } from "./minilm.js";
import {
  escape, loadOnClick, onInput, onSchemeChange, reportErrors, say, textColour, viridis,
} from "./ui.js";
import { WordPiece } from "./wordpiece.js";

const MAX_TOKENS = 256; // as the sentence-embeddings chapter cuts, and as sentence-transformers

const root = document.getElementById("live-attention");
const $ = (selector) => root.querySelector(selector);
const first = $("[data-live-first]"), second = $("[data-live-second]");
const layerChoice = $("[data-live-layer]");
let model, tokenizer, selectedHead = 0, firstRun = true;

say(root, "Load the model to start: the page computes everything in your browser.");
loadOnClick(root, "minilm", (files) => {
  model = new MiniLM(files.config, files.tensors);
  tokenizer = new WordPiece(files.tokenizer);
  say(root, "MiniLM is loaded. Type, and every tensor below is computed again.");
  run();
});

const run = reportErrors(root, () => {
  if (!model) return;
  const started = performance.now();
  const a = first.value, b = second.value.trim() ? second.value : null;
  const encoded = tokenizer.encode(a, b);
  if (encoded.ids.length > MAX_TOKENS) {
    say(root, `${encoded.ids.length} tokens: this page takes at most ${MAX_TOKENS}.`, true);
    return;
  }
  const out = model.forward(encoded.ids, encoded.typeIds);
  const D = model.config.hidden_size, T = encoded.ids.length;
  const embeddings = b === null ? [] : [a, b].map((text) => {
    const alone = tokenizer.encode(text);
    const hidden = model.forward(alone.ids, alone.typeIds).hidden;
    return sentenceEmbedding(hidden[hidden.length - 1], alone.ids.length, D);
  });
  // each token's vector length after the embeddings and after each layer: (L + 1) × T
  const norms = out.hidden.map((x) =>
    encoded.tokens.map((_, t) => Math.hypot(...x.subarray(t * D, (t + 1) * D))));
  root.result = {
    texts: [a, b], ...encoded, hidden: out.hidden, attentions: out.attentions, norms,
    pooled: out.pooled, embeddings,
    cosine: embeddings.length ? cosine(...embeddings) : null,
  };
  draw();
  root.result.milliseconds = performance.now() - started;
  root.result.first = firstRun;
  firstRun = false;
  say(root, `${T} tokens, computed and drawn in ${root.result.milliseconds.toFixed(0)} ms.`);
});

function draw() {
  const { tokens, ids, typeIds, attentions, norms, cosine: similarity } = root.result;
  drawTokens(tokens, ids, typeIds);
  drawHeads(attentions[Number(layerChoice.value)], tokens);
  drawNorms(norms, tokens);
  $("[data-live-cosine]").textContent = similarity === null
    ? "Type a second sentence to compare the two."
    : `Cosine similarity of the two sentence embeddings: ${similarity.toFixed(4)}`;
}

function drawTokens(tokens, ids, typeIds) {
  const row = (name, values) =>
    `<tr><th>${name}</th>${values.map((v) => `<td>${escape(String(v))}</td>`).join("")}</tr>`;
  $("[data-live-tokens]").innerHTML =
    `<table>${row("token", tokens)}${row("id", ids)}${row("type", typeIds)}</table>`;
}

// One small heatmap per head; the selected head drawn large, with the tokens on its axes.
function drawHeads(heads, tokens) {
  const grid = $("[data-live-heads]");
  grid.replaceChildren(...heads.map((p, h) => {
    const figure = document.createElement("figure");
    const canvas = heatmap(p, tokens.length, 120, null);
    canvas.classList.toggle("live-selected", h === selectedHead);
    canvas.addEventListener("click", () => { selectedHead = h; draw(); });
    const caption = document.createElement("figcaption");
    caption.textContent = `head ${h}`;
    figure.append(canvas, caption);
    return figure;
  }));
  $("[data-live-head-title]").textContent =
    `Layer ${layerChoice.value}, head ${selectedHead}: each row is a token, attending to the ` +
    "tokens of the columns; every row sums to 1.";
  $("[data-live-head]").replaceChildren(heatmap(heads[selectedHead], tokens.length, 640, tokens));
}

function heatmap(p, T, size, tokens) {
  const canvas = document.createElement("canvas");
  const margin = tokens ? 90 : 0, cell = (size - margin) / T, scale = devicePixelRatio;
  canvas.width = size * scale;
  canvas.height = size * scale;
  canvas.style.width = canvas.style.height = `${size}px`;
  const context = canvas.getContext("2d");
  context.scale(scale, scale);
  for (let i = 0; i < T; i++) {
    for (let j = 0; j < T; j++) {
      context.fillStyle = viridis(p[i * T + j]);
      context.fillRect(margin + j * cell, margin + i * cell, Math.ceil(cell), Math.ceil(cell));
    }
  }
  if (tokens) {
    const font = Math.min(12, cell * 0.9);
    context.font = `${font}px sans-serif`;
    context.fillStyle = textColour();
    context.textAlign = "right";
    context.textBaseline = "middle";
    tokens.forEach((token, i) => {
      const label = token.length > 12 ? `${token.slice(0, 11)}…` : token;
      context.fillText(label, margin - 4, margin + (i + 0.5) * cell);
      context.save();
      context.translate(margin + (i + 0.5) * cell, margin - 4);
      context.rotate(-Math.PI / 2);
      context.textAlign = "left";
      context.fillText(label, 0, 0);
      context.restore();
    });
    canvas.title = "Hover a cell for its probability";
    canvas.addEventListener("mousemove", (event) => {
      const j = Math.floor((event.offsetX - margin) / cell);
      const i = Math.floor((event.offsetY - margin) / cell);
      if (i >= 0 && j >= 0 && i < T && j < T) {
        canvas.title = `${tokens[i]} → ${tokens[j]}: ${p[i * T + j].toFixed(4)}`;
      }
    });
  }
  return canvas;
}

// The vector lengths as a table: a row per token, a column per layer.
function drawNorms(norms, tokens) {
  const largest = Math.max(...norms.flat());
  const header = ["token", "embeddings", ...norms.slice(1).map((_, l) => `layer ${l}`)];
  const rows = tokens.map((token, t) => `<tr><th>${escape(token)}</th>${norms.map((n) =>
    `<td style="--share: ${(100 * n[t] / largest).toFixed(0)}%">${n[t].toFixed(2)}</td>`
  ).join("")}</tr>`);
  $("[data-live-norms]").innerHTML =
    `<table><tr>${header.map((h) => `<th>${h}</th>`).join("")}</tr>${rows.join("")}</table>`;
}

onInput([first, second], run);
layerChoice.addEventListener("change", draw);
onSchemeChange(() => root.result && draw());
