// WordPiece, BERT's tokenizer, in the browser: the tokens, ids and token types of MiniLM's
// tokenizer in Python (Hugging Face's Rust `tokenizers`), read from its tokenizer.json.
// Strings are walked with for...of and Array.from, which step over whole characters (code
// points): `.length` and indexing count UTF-16 units, two for "🤗".

// --8<-- [start:normalize]
// The normalizer: clean, space out Chinese characters, strip accents, lowercase.
export function normalize(text) {
  let cleaned = "";
  for (const c of text) {
    if (c === "\uFFFD" || isControl(c)) continue; // controls, and the replacement character
    else if (/\p{White_Space}/u.test(c)) cleaned += " "; // tabs, newlines, "\u00A0"...
    else if (isChinese(c.codePointAt(0))) cleaned += ` ${c} `; // each one a word
    else cleaned += c;
  }
  // NFD splits "é" into "e" and a combining accent (a nonspacing mark), which goes; the
  // characters Rust's tables do not know (see below) are neither decomposed nor dropped.
  const stripped = cleaned.split(UNKNOWN_TO_RUST).map((part, i) => i % 2 ? part
    : Array.from(part.normalize("NFD")).filter((c) => !isMark(c)).join("")).join("");
  // one character at a time, as Rust does: "Σ" is "σ" even at the end of a word, where
  // JavaScript's toLowerCase on a whole string would write the final "ς"
  return Array.from(stripped, (c) => c.toLowerCase()).join("");
}

// The pre-tokenizer: words at whitespace, and each punctuation character a word of its own.
export function preTokenize(normalized) {
  const words = [];
  for (const word of normalized.split(/\p{White_Space}+/u)) {
    let current = "";
    for (const c of word) {
      if (!isPunctuation(c)) { current += c; continue; }
      if (current) words.push(current);
      words.push(c);
      current = "";
    }
    if (current) words.push(current);
  }
  return words;
}

// Rust's `tokenizers` reads character categories from tables of Unicode 8.0: a character
// added since is unassigned to it, neither control, accent nor punctuation; four changed.
const CHANGED_SINCE_8 = { "\u166D": "P", "\u{111C9}": "P", "\u1734": "Mn", "\u{1171E}": "Mn" };
const inUnicode8 = (category, pattern) => (c) => c in CHANGED_SINCE_8
  ? CHANGED_SINCE_8[c] === category : !UNKNOWN_TO_RUST.test(c) && pattern.test(c);
const isControl = inUnicode8("C", /(?![\t\n\r])[\p{Cc}\p{Cf}\p{Co}]/u); // \t\n\r: whitespace
const isMark = inUnicode8("Mn", /\p{Mn}/u);
// ASCII's symbols "$+<=>^`|~" count as punctuation too
const isPunctuation = (c) => /[!-/:-@[-`{-~]/.test(c) || isUnicodePunctuation(c);
const isUnicodePunctuation = inUnicode8("P", /\p{P}/u);

// The CJK Unified Ideographs blocks: Japanese kana and Korean hangul are not in them.
const isChinese = (cp) => (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF)
  || (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B81F)
  || (cp >= 0x2B920 && cp <= 0x2CEAF) || (cp >= 0xF900 && cp <= 0xFAFF)
  || (cp >= 0x2F800 && cp <= 0x2FA1F);
// --8<-- [end:normalize]

// --8<-- [start:wordpiece]
// Split one word greedily: the longest vocabulary entry first, then the rest.
export function wordpiece(word, vocab, unkToken = "[UNK]", maxChars = 100) {
  const chars = Array.from(word);
  if (chars.length > maxChars) return [unkToken];
  const pieces = [];
  let start = 0;
  while (start < chars.length) {
    let end = chars.length, piece;
    for (; end > start; end--) {
      piece = (start === 0 ? "" : "##") + chars.slice(start, end).join("");
      if (vocab.has(piece)) break;
    }
    if (end === start) return [unkToken]; // not even one character matched: the word is unknown
    pieces.push(piece);
    start = end;
  }
  return pieces;
}
// --8<-- [end:wordpiece]

export class WordPiece {
  constructor(tokenizerJson) {
    const { model, added_tokens: added } = tokenizerJson;
    this.ids = new Map(Object.entries(model.vocab));
    this.unkToken = model.unk_token;
    this.maxChars = model.max_input_chars_per_word;
    // Special tokens ("[MASK]") are found in the raw text, before normalization; at one
    // place the longest wins. (None of them sets lstrip, rstrip or single_word.)
    const escaped = added.map((t) => t.content).sort((a, b) => b.length - a.length)
      .map((t) => t.replace(/[\\^$.*+?()[\]{}|]/g, "\\$&"));
    this.special = new RegExp(`(${escaped.join("|")})`, "u");
  }

  tokenize(text) {
    return text.split(this.special).flatMap((part, i) => i % 2 ? [part]
      : preTokenize(normalize(part)).flatMap((word) =>
        wordpiece(word, this.ids, this.unkToken, this.maxChars)));
  }

  // [CLS] text [SEP], and for a pair, pair [SEP] after it with token type 1; an empty pair is
  // none, as in transformers. No truncation and no padding: transformers ignores the ones
  // tokenizer.json sets unless asked for them.
  encode(text, pair = null) {
    const first = ["[CLS]", ...this.tokenize(text), "[SEP]"];
    const second = pair ? [...this.tokenize(pair), "[SEP]"] : [];
    const tokens = [...first, ...second];
    return {
      tokens,
      ids: tokens.map((token) => this.ids.get(token)),
      typeIds: [...first.map(() => 0), ...second.map(() => 1)],
    };
  }
}

// The characters Unicode added after 8.0 that a newer browser would count as controls, accents
// or punctuation, or would decompose (measured against the Rust library on every code point, in
// a browser of Unicode 17). Rust keeps them as they are.
const UNKNOWN_TO_RUST = characterClass(`
  61d 7fd 890-891 897-89f 8ca-8e2 9fd-9fe a76 afa-aff b55 c04 c3c c77 c84 d00 d3b-d3c d81 eba ece
  180f 1885-1886 1abf-1add 1ae0-1aeb 1b4e-1b4f 1b7d-1b7f 1df6-1dfb 2e43-2e4f 2e52-2e5d a82c a8c5
  a8ff a9bd 105c9 105e4 10d24-10d27 10d69-10d6e 10eab-10ead 10ed0 10efa-10eff 10f46-10f50
  10f55-10f59 10f82-10f89 11070 11073-11074 110c2 110cd 111cf 1123e 11241 1133b 11383 11385 1138e
  11391 113bb-113c0 113c5 113c7-113c8 113ce 113d0 113d2 113d4-113d5 113d7-113d8 113e1-113e2
  11438-1143f 11442-11444 11446 1144b-1144f 1145a-1145b 1145d-1145e 11660-1166c 116b9 1182f-11837
  11839-1183b 11938 1193b-1193c 1193e 11943-11946 119d4-119d7 119da-119db 119e0 119e2 11a01-11a0a
  11a33-11a38 11a3b-11a47 11a51-11a56 11a59-11a5b 11a8a-11a96 11a98-11a9c 11a9e-11aa2 11b00-11b09
  11b60 11b62-11b64 11b66 11be1 11c30-11c36 11c38-11c3d 11c3f 11c41-11c45 11c70-11c71 11c92-11ca7
  11caa-11cb0 11cb2-11cb3 11cb5-11cb6 11d31-11d36 11d3a 11d3c-11d3d 11d3f-11d45 11d47 11d90-11d91
  11d95 11d97 11ef3-11ef4 11ef7-11ef8 11f00-11f01 11f36-11f3a 11f40 11f42-11f4f 11f5a 11fff
  12ff1-12ff2 13430-13440 13447-13455 1611e-16129 1612d-1612f 16d68-16d6a 16d6d-16d6f 16e97-16e9a
  16f4f 16fe2 16fe4 1cf00-1cf2d 1cf30-1cf46 1e000-1e006 1e008-1e018 1e01b-1e021 1e023-1e024
  1e026-1e02a 1e08f 1e130-1e136 1e2ae 1e2ec-1e2ef 1e4ec-1e4ef 1e5ee-1e5ef 1e5ff 1e6e3 1e6e6
  1e6ee-1e6ef 1e6f5 1e944-1e94a 1e95e-1e95f`);

// "890-891 8e2" (hexadecimal code points) as the regular expression /([\u{890}-\u{891}\u{8e2}])/u
function characterClass(ranges) {
  const escaped = ranges.trim().split(/\s+/).map((r) => r.replace(/[0-9a-f]+/g, "\\u{$&}"));
  return new RegExp(`([${escaped.join("")}])`, "u");
}
