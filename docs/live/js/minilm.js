// MiniLM (sentence-transformers/all-MiniLM-L6-v2), a BertModel, by hand: Part I's forward
// pass for one sequence, no padding. Shapes: T tokens, D = 384 features, H = 12 heads of
// Dh = 32, L = 6 layers.
import { Model, add, gelu, layerNorm, linear, map, softmax } from "./tensors.js";

export class MiniLM extends Model {
  // --8<-- [start:embed]
  // Word + position + token type, then LayerNorm: (T, D)
  embed(ids, typeIds) {
    const D = this.config.hidden_size, T = ids.length, x = new Float32Array(T * D);
    const words = this.tensor("embeddings.word_embeddings.weight").data;
    const positions = this.tensor("embeddings.position_embeddings.weight").data;
    const types = this.tensor("embeddings.token_type_embeddings.weight").data;
    for (let t = 0; t < T; t++) {
      for (let d = 0; d < D; d++) {
        x[t * D + d] = words[ids[t] * D + d] + positions[t * D + d] + types[typeIds[t] * D + d];
      }
    }
    const norm = this.module("embeddings.LayerNorm");
    return layerNorm(x, T, norm, this.config.layer_norm_eps);
  }
  // --8<-- [end:embed]

  // --8<-- [start:self_attention]
  // Every token attends to every token: softmax(q k^T / sqrt(Dh)) v, head by head.
  // Returns the context (T, D) and each head's probabilities (T, T).
  selfAttention(prefix, x, T) {
    const D = this.config.hidden_size, H = this.config.num_attention_heads, Dh = D / H;
    const q = linear(x, T, this.module(`${prefix}.query`));
    const k = linear(x, T, this.module(`${prefix}.key`));
    const v = linear(x, T, this.module(`${prefix}.value`));
    const context = new Float32Array(T * D), probabilities = [];
    for (let h = 0; h < H; h++) {
      const p = new Float32Array(T * T), head = h * Dh; // head h: features head..head+Dh
      for (let i = 0; i < T; i++) {
        const row = p.subarray(i * T, (i + 1) * T);
        for (let j = 0; j < T; j++) {
          let dot = 0;
          for (let d = 0; d < Dh; d++) dot += q[i * D + head + d] * k[j * D + head + d];
          row[j] = dot / Math.sqrt(Dh);
        }
        softmax(row);
        for (let d = 0; d < Dh; d++) {
          let sum = 0;
          for (let j = 0; j < T; j++) sum += row[j] * v[j * D + head + d];
          context[i * D + head + d] = sum;
        }
      }
      probabilities.push(p);
    }
    return { context, probabilities };
  }
  // --8<-- [end:self_attention]

  // --8<-- [start:layer]
  // One post-norm layer: attention, residual, LayerNorm; feed-forward, residual, LayerNorm.
  layer(l, x, T) {
    const at = `encoder.layer.${l}`, eps = this.config.layer_norm_eps;
    const { context, probabilities } = this.selfAttention(`${at}.attention.self`, x, T);
    const projected = linear(context, T, this.module(`${at}.attention.output.dense`));
    const h = layerNorm(add(projected, x), T, this.module(`${at}.attention.output.LayerNorm`), eps);
    const inner = map(linear(h, T, this.module(`${at}.intermediate.dense`)), gelu); // (T, 4D)
    const out = linear(inner, T, this.module(`${at}.output.dense`));
    return { x: layerNorm(add(out, h), T, this.module(`${at}.output.LayerNorm`), eps),
             probabilities };
  }
  // --8<-- [end:layer]

  // --8<-- [start:forward]
  // Every hidden state (L + 1 of (T, D): the embeddings, then each layer's output), every
  // layer's attention probabilities (L of H of (T, T)), and the pooler's output (D).
  forward(ids, typeIds) {
    const T = ids.length;
    let x = this.embed(ids, typeIds);
    const hidden = [x], attentions = [];
    for (let l = 0; l < this.config.num_hidden_layers; l++) {
      const out = this.layer(l, x, T);
      x = out.x;
      hidden.push(x);
      attentions.push(out.probabilities);
    }
    const D = this.config.hidden_size;
    const pooled = map(linear(x.subarray(0, D), 1, this.module("pooler.dense")), Math.tanh);
    return { hidden, attentions, pooled };
  }
  // --8<-- [end:forward]
}

// --8<-- [start:mean_pool]
// The sentence embedding all-MiniLM-L6-v2 defines: the mean of the last hidden states over
// the tokens, [CLS] and [SEP] included, scaled to length 1.
export function sentenceEmbedding(lastHidden, T, D) {
  const mean = new Float64Array(D);
  for (let t = 0; t < T; t++) for (let d = 0; d < D; d++) mean[d] += lastHidden[t * D + d] / T;
  const length = Math.hypot(...mean);
  return Float32Array.from(mean, (m) => m / Math.max(length, 1e-12));
}

export const cosine = (a, b) => a.reduce((sum, ai, i) => sum + ai * b[i], 0);
// --8<-- [end:mean_pool]
