// Byte-level BPE, GPT-2's tokenizer, in the browser: the tokens and ids of the book's GPT-2
// tokenizer in Python (Hugging Face's Rust `tokenizers`), read from its tokenizer.json, and
// its decoding of ids back to text.

// --8<-- [start:byte_symbols]
// GPT-2's table from each of the 256 byte values to one printable character.
// Bytes that are printable Latin-1 characters stand for themselves; the other 68
// (control characters, the space, the non-breaking space, the soft hyphen) are
// given the characters from 256 on, in order: the space becomes "Ġ", a newline "Ċ".
export function byteSymbols() {
  const printable = (b) => (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  const table = [];
  let shifted = 0;
  for (let byte = 0; byte < 256; byte++) {
    table.push(String.fromCodePoint(printable(byte) ? byte : 256 + shifted++));
  }
  return table;
}
// --8<-- [end:byte_symbols]

// --8<-- [start:bpe]
// Split a word (a string of byte symbols) into tokens by applying the merges.
// Start from single symbols; repeatedly merge the adjacent pair that was learned
// first (lowest rank), the leftmost if it occurs twice, until no pair has a merge.
// ranks: a Map from a pair, written "left right", to its rank.
export function bpe(word, ranks) {
  const parts = Array.from(word);
  while (parts.length > 1) {
    let best = -1, bestRank = Infinity;
    for (let i = 0; i + 1 < parts.length; i++) {
      const rank = ranks.get(`${parts[i]} ${parts[i + 1]}`) ?? Infinity;
      if (rank < bestRank) [best, bestRank] = [i, rank];
    }
    if (best < 0) break;
    parts.splice(best, 2, parts[best] + parts[best + 1]);
  }
  return parts;
}
// --8<-- [end:bpe]

// GPT-2's pre-tokenizer: a regular expression splits the text into words before the merges:
// contractions; letters, digits or other symbols, each run with the space before it; and
// whitespace. Its classes are read as the Rust library (Oniguruma, of Unicode 16) reads them:
// \s is \t to \r, "\x85" and the space separators; the letters and digits Unicode 17 added
// (measured against the library on every code point) are neither to it.
const ADDED_IN_17 = codePoints(`
  88f c5c cdc a7ce-a7cf a7d2 a7d4 a7f1 10940-10959 10ec5-10ec7 11db0-11ddb 11de0-11de9
  16ea0-16eb8 16ebb-16ed3 16ff2-16ff6 187f8-187ff 18d09-18d1e 18d80-18df2 1e6c0-1e6de
  1e6e0-1e6e2 1e6e4-1e6e5 1e6e7-1e6ed 1e6f0-1e6f4 1e6fe-1e6ff 2b73a-2b73f 2cea2-2cead
  323b0-33479`);
const S = String.raw`[\t-\r\x85\p{Zs}\p{Zl}\p{Zp}]`;
const L = String.raw`[\p{L}--${ADDED_IN_17}]`;
const N = String.raw`[\p{N}--${ADDED_IN_17}]`;
const WORDS = new RegExp(String.raw`'s|'t|'re|'ve|'m|'ll|'d| ?${L}+| ?${N}+| ?[^${S}${L}${N}]+`
  + String.raw`|${S}+(?![^${S}])|${S}+`, "gv"); // v: classes may subtract and nest

// "88f a7ce-a7cf" (hexadecimal code points) as the class [\u{88f}\u{a7ce}-\u{a7cf}]
function codePoints(ranges) {
  const escaped = ranges.trim().split(/\s+/).map((r) => r.replace(/[0-9a-f]+/g, "\\u{$&}"));
  return `[${escaped.join("")}]`;
}

export class ByteLevelBPE {
  constructor(tokenizerJson) {
    const { model, added_tokens: added } = tokenizerJson;
    this.ids = new Map(Object.entries(model.vocab));
    for (const { content, id } of added) this.ids.set(content, id);
    this.tokens = [];
    for (const [token, id] of this.ids) this.tokens[id] = token;
    // the merges in the order they were learned, as pairs ["Ġ", "t"] (older files: "Ġ t")
    this.ranks = new Map(model.merges.map((m, rank) => [Array.isArray(m) ? m.join(" ") : m, rank]));
    this.symbols = byteSymbols();
    this.bytes = new Map(this.symbols.map((symbol, byte) => [symbol, byte]));
    // Special tokens ("<|endoftext|>") are found in the raw text first; at one place the
    // longest wins.
    const escaped = added.map((t) => t.content).sort((a, b) => b.length - a.length)
      .map((t) => t.replace(/[\\^$.*+?()[\]{}|]/g, "\\$&"));
    this.special = new RegExp(`(${escaped.join("|")})`, "u");
    this.cache = new Map(); // word -> tokens: the pages tokenize again at every keystroke
  }

  encode(text) {
    const tokens = text.split(this.special).flatMap((part, i) => i % 2 ? [part]
      : Array.from(part.matchAll(WORDS), ([word]) => this.merged(word)).flat());
    return { tokens, ids: tokens.map((token) => this.ids.get(token)) };
  }

  // A word's UTF-8 bytes as byte symbols, merged.
  merged(word) {
    let tokens = this.cache.get(word);
    if (tokens === undefined) {
      const symbols = Array.from(new TextEncoder().encode(word), (b) => this.symbols[b]);
      tokens = bpe(symbols.join(""), this.ranks);
      if (this.cache.size > 50_000) this.cache.clear();
      this.cache.set(word, tokens);
    }
    return tokens;
  }

  // Each token's symbols back to bytes, the bytes read as UTF-8. Bytes that are no valid UTF-8
  // (a character cut between tokens) read as "\uFFFD", as in Rust's from_utf8_lossy; and a
  // leading byte order mark is kept, which TextDecoder would drop unless told.
  decode(ids) {
    const bytes = ids.flatMap((id) => Array.from(this.tokens[id], (s) => this.bytes.get(s)));
    return new TextDecoder("utf-8", { ignoreBOM: true }).decode(new Uint8Array(bytes));
  }
}
