// The book's GPT-2 (tensor-by-tensor/gpt2-shakespeare) by hand, with its KV cache: Part III's
// forward pass. Shapes: T new tokens, P tokens already cached, D = 256 features,
// H = 4 heads of Dh = 64, L = 4 blocks, V = 4096 tokens in the vocabulary.
import { Model, add, conv1d, geluTanh, layerNorm, map, softmax } from "./tensors.js";

export class GPT2 extends Model {
  // --8<-- [start:cache]
  // Each block keeps the keys and values of every token it has seen: (P, D) each, in
  // buffers sized for the longest sequence the model takes (n_positions).
  emptyCache() {
    const { n_layer: L, n_embd: D, n_positions: maxT } = this.config;
    return {
      length: 0,
      keys: Array.from({ length: L }, () => new Float32Array(maxT * D)),
      values: Array.from({ length: L }, () => new Float32Array(maxT * D)),
      bytes() { return 2 * L * this.length * D * 4; }, // what it holds, in float32
    };
  }
  // --8<-- [end:cache]

  // --8<-- [start:attention]
  // Causal self-attention for T new tokens after P cached ones: the new keys and values go
  // into the cache, and new token i attends to positions 0..P+i, no further.
  attention(l, x, T, cache) {
    const { n_embd: D, n_head: H } = this.config, Dh = D / H, P = cache.length;
    const qkv = conv1d(x, T, this.module(`transformer.h.${l}.attn.c_attn`)); // (T, 3D)
    const keys = cache.keys[l], values = cache.values[l];
    for (let t = 0; t < T; t++) {
      keys.set(qkv.subarray(t * 3 * D + D, t * 3 * D + 2 * D), (P + t) * D);
      values.set(qkv.subarray(t * 3 * D + 2 * D, (t + 1) * 3 * D), (P + t) * D);
    }
    const context = new Float32Array(T * D), scores = new Float64Array(P + T);
    for (let h = 0; h < H; h++) {
      for (let i = 0; i < T; i++) {
        const seen = P + i + 1; // the causal mask: nothing after position P + i
        const query = i * 3 * D + h * Dh; // where head h's query of token i starts
        for (let j = 0; j < seen; j++) {
          let dot = 0;
          for (let d = 0; d < Dh; d++) dot += qkv[query + d] * keys[j * D + h * Dh + d];
          scores[j] = dot / Math.sqrt(Dh);
        }
        softmax(scores, seen);
        for (let d = 0; d < Dh; d++) {
          let sum = 0;
          for (let j = 0; j < seen; j++) sum += scores[j] * values[j * D + h * Dh + d];
          context[i * D + h * Dh + d] = sum;
        }
      }
    }
    return conv1d(context, T, this.module(`transformer.h.${l}.attn.c_proj`));
  }
  // --8<-- [end:attention]

  // --8<-- [start:block]
  // A pre-norm block: x + attention(LayerNorm(x)), then + MLP(LayerNorm(x)).
  block(l, x, T, cache) {
    const at = `transformer.h.${l}`, eps = this.config.layer_norm_epsilon;
    add(x, this.attention(l, layerNorm(x, T, this.module(`${at}.ln_1`), eps), T, cache));
    const inner = map(conv1d(layerNorm(x, T, this.module(`${at}.ln_2`), eps), T,
                             this.module(`${at}.mlp.c_fc`)), geluTanh); // (T, 4D)
    return add(x, conv1d(inner, T, this.module(`${at}.mlp.c_proj`)));
  }
  // --8<-- [end:block]

  // --8<-- [start:forward]
  // The logits (V) of the next token after `ids`, the T tokens that follow the cache's P.
  forward(ids, cache) {
    const { n_embd: D, vocab_size: V } = this.config, T = ids.length, P = cache.length;
    const wte = this.tensor("transformer.wte.weight").data;
    const wpe = this.tensor("transformer.wpe.weight").data;
    const x = new Float32Array(T * D);
    for (let t = 0; t < T; t++) {
      for (let d = 0; d < D; d++) {
        x[t * D + d] = wte[ids[t] * D + d] + wpe[(P + t) * D + d]; // positions from P
      }
    }
    for (let l = 0; l < this.config.n_layer; l++) this.block(l, x, T, cache);
    cache.length = P + T;
    const eps = this.config.layer_norm_epsilon;
    const last = layerNorm(x.subarray((T - 1) * D), 1, this.module("transformer.ln_f"), eps);
    const logits = new Float32Array(V); // the head is wte itself (tied weights)
    for (let v = 0; v < V; v++) {
      let dot = 0;
      for (let d = 0; d < D; d++) dot += last[d] * wte[v * D + d];
      logits[v] = dot;
    }
    return logits;
  }
  // --8<-- [end:forward]
}

// --8<-- [start:processors]
// Part III's processors, in the order transformers applies them when sampling.
export function applyTemperature(scores, temperature) {
  return scores.map((s) => s / temperature);
}

// The k highest scores, and any tied with the k-th; the rest get -Infinity.
export function keepTopK(scores, k) {
  const kthBest = Float32Array.from(scores).sort().reverse()[Math.min(k, scores.length) - 1];
  return scores.map((s) => (s < kthBest ? -Infinity : s));
}

// Nucleus, as transformers does it: sorted from the least likely up, a token is removed
// when it and every token below it hold 1 - p or less; the most likely token stays.
// Two differences remain. This sort is stable (the later of two tied tokens ranks higher),
// while torch.sort keeps that order only on short rows. And the sums here are float64,
// torch's float32, so a token whose mass lands exactly on 1 - p can go either way.
export function keepTopP(scores, p) {
  const probabilities = softmax(Float64Array.from(scores));
  const order = Array.from(scores.keys()).sort((a, b) => scores[a] - scores[b]);
  const out = Float32Array.from(scores);
  let massUpTo = 0;
  for (const token of order.slice(0, -1)) {
    massUpTo += probabilities[token];
    if (massUpTo <= 1 - p) out[token] = -Infinity;
  }
  return out;
}

// The next token's probabilities with the reader's settings (top-k 0 and top-p 1: off).
export function nextTokenProbabilities(logits, { temperature = 1, topK = 0, topP = 1 }) {
  let scores = Float32Array.from(logits);
  if (temperature !== 1) scores = applyTemperature(scores, temperature);
  if (topK > 0) scores = keepTopK(scores, topK);
  if (topP < 1) scores = keepTopP(scores, topP);
  return softmax(Float64Array.from(scores));
}
// --8<-- [end:processors]

// A token drawn from the probabilities, or the most likely one when greedy.
export function pick(probabilities, greedy, random = Math.random) {
  if (greedy) return probabilities.indexOf(Math.max(...probabilities));
  let u = random();
  for (let token = 0; token < probabilities.length; token++) {
    u -= probabilities[token];
    if (u < 0) return token;
  }
  return probabilities.length - 1;
}
