// What both live pages share: fetching a model with a progress bar, messages, colours.
import { fetchFiles, fetchManifest, readSafetensors } from "./weights.js";

const MODELS = new URL("../models/", import.meta.url);
const manifest = fetchManifest(MODELS); // a few hundred bytes: the files' names and sizes

// The button that loads the model says how much it will fetch.
async function sizeOnButton(button, folder) {
  const files = (await manifest)[folder];
  button.textContent += ` (${mib(files.reduce((sum, f) => sum + f.bytes, 0))})`;
}

// The model's config, tokenizer and tensors, fetched (or read from the browser's cache)
// into `progress`; the page's <p data-live-status> says what happens.
async function loadModel(root, folder, progress) {
  const files = (await manifest)[folder];
  progress.hidden = false;
  const bytes = await fetchFiles(new URL(`${folder}/`, MODELS), files, (received, total) => {
    progress.max = total;
    progress.value = received;
    say(root, `Loading: ${mib(received)} of ${mib(total)}`);
  });
  const json = (name) => JSON.parse(new TextDecoder().decode(bytes[name]));
  let tensors = {};
  for (const file of files.filter((f) => f.name.endsWith(".safetensors"))) {
    tensors = { ...tensors, ...readSafetensors(bytes[file.name]) };
  }
  return { config: json("config.json"), tokenizer: json("tokenizer.json"), tensors };
}

// The load button: fetch the model's files, then hand them to `ready` and show the controls
// in place of the button and its progress bar. If the fetch fails, the button can be pressed
// again.
export function loadOnClick(root, folder, ready) {
  const button = root.querySelector("[data-live-load]");
  reportErrors(root, sizeOnButton)(button, folder);
  button.addEventListener("click", reportErrors(root, async () => {
    button.disabled = true;
    let files;
    try {
      files = await loadModel(root, folder, root.querySelector("[data-live-loader] progress"));
    } finally {
      button.disabled = false;
    }
    root.querySelector("[data-live-loader]").hidden = true;
    root.querySelector("[data-live-controls]").hidden = false;
    ready(files);
  }));
}

export const escape = (text) =>
  text.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

export function say(root, message, isError = false) {
  const status = root.querySelector("[data-live-status]");
  status.textContent = message;
  status.classList.toggle("live-error", isError);
}

// Runs `work` on each change of the inputs, once the reader pauses typing.
export function onInput(inputs, work, delay = 150) {
  let timer;
  for (const input of inputs) {
    input.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(work, delay);
    });
  }
}

// A colour for a value in [0, 1] on viridis, readable on light and dark backgrounds alike.
const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
export function viridis(value) {
  const x = Math.min(Math.max(value, 0), 1) * (VIRIDIS.length - 1);
  const i = Math.min(Math.floor(x), VIRIDIS.length - 2), f = x - i;
  const [r, g, b] = VIRIDIS[i].map((c, k) => Math.round(c + f * (VIRIDIS[i + 1][k] - c)));
  return `rgb(${r}, ${g}, ${b})`;
}

// The theme's text colour (it changes with light and dark mode).
export const textColour = () =>
  getComputedStyle(document.body).getPropertyValue("--md-default-fg-color").trim() || "#000";

// Redraw when the reader switches between light and dark mode.
export function onSchemeChange(redraw) {
  new MutationObserver(redraw).observe(document.body, {
    attributes: true,
    attributeFilter: ["data-md-color-scheme"],
  });
}

// A failure the reader should see, not only the console.
export function reportErrors(root, work) {
  return async (...args) => {
    try {
      return await work(...args);
    } catch (error) {
      say(root, `Something went wrong: ${error.message}`, true);
      console.error(error);
    }
  };
}
