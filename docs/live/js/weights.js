// Model files, fetched once with a progress bar and kept by the browser (Cache Storage),
// then read as safetensors: an 8-byte header length, a JSON header, the tensors' bytes.

const CACHE = "tensor-by-tensor-models";

// manifest.json, written by the site build, gives each file's size and sha256; the sha256
// is part of the cache key, so a new file is fetched again and the old one dropped.
export async function fetchManifest(base) {
  const response = await fetch(new URL("manifest.json", base));
  if (!response.ok) throw new Error(`manifest.json: HTTP ${response.status}`);
  return response.json();
}

// The files' bytes, by name; onProgress(received, total) as they arrive.
export async function fetchFiles(base, files, onProgress) {
  const total = files.reduce((sum, f) => sum + f.bytes, 0);
  const cache = globalThis.caches ? await caches.open(CACHE) : null;
  const bytes = {};
  let received = 0;
  for (const file of files) {
    const url = new URL(`${file.name}?sha256=${file.sha256}`, base).href;
    let response = cache && (await cache.match(url));
    if (response) {
      bytes[file.name] = new Uint8Array(await response.arrayBuffer());
    } else {
      bytes[file.name] = await download(url, file.bytes, (n) => onProgress(received + n, total));
      if (cache) await keep(cache, url, bytes[file.name]);
    }
    received += file.bytes;
    onProgress(received, total);
  }
  return bytes;
}

async function download(url, size, onProgress) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  const reader = response.body.getReader(), out = new Uint8Array(size);
  for (let at = 0; ; ) {
    const { done, value } = await reader.read();
    if (done) {
      if (at !== size) throw new Error(`${url}: got ${at} bytes of ${size}`);
      return out;
    }
    out.set(value, at);
    at += value.length;
    onProgress(at);
  }
}

async function keep(cache, url, bytes) {
  const path = new URL(url).pathname;
  for (const old of await cache.keys()) {
    if (new URL(old.url).pathname === path) await cache.delete(old);
  }
  try {
    await cache.put(url, new Response(bytes));
  } catch {
    // storage full or refused: the model still runs, and is fetched again next time
  }
}

// --8<-- [start:safetensors]
// A safetensors file as { name: { shape, data: Float32Array } } (all the book's are F32).
export function readSafetensors(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = Number(view.getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength)));
  const tensors = {};
  const { __metadata__, ...entries } = header;
  for (const [name, { dtype, shape, data_offsets: [begin, end] }] of Object.entries(entries)) {
    if (dtype !== "F32") throw new Error(`${name}: ${dtype}, expected F32`);
    const start = bytes.byteOffset + 8 + headerLength + begin;
    // a Float32Array must start on a multiple of 4 bytes; copy the rare tensor that doesn't
    const buffer = start % 4 ? bytes.slice(start - bytes.byteOffset).buffer : bytes.buffer;
    const offset = start % 4 ? 0 : start;
    tensors[name] = { shape, data: new Float32Array(buffer, offset, (end - begin) / 4) };
  }
  return tensors;
}
// --8<-- [end:safetensors]
