// The few tensor operations both live models need, on Float32Arrays in row-major order.
// Sums run in JavaScript's float64 and are stored in float32, as torch stores its results.
// Shapes: T tokens, D features; a weight stored as torch stores it.

// A model's config and its weights, by the names torch gives them.
export class Model {
  constructor(config, tensors) {
    this.config = config;
    this.tensors = tensors;
  }

  tensor(name) {
    if (!(name in this.tensors)) throw new Error(`no tensor ${name}`);
    return this.tensors[name];
  }

  // A Linear, LayerNorm or Conv1D: its weight and bias
  module(prefix) {
    return { weight: this.tensor(`${prefix}.weight`), bias: this.tensor(`${prefix}.bias`) };
  }
}

// --8<-- [start:linear]
// nn.Linear: x (T, inDim) @ W.T + b, with W as torch stores it: (outDim, inDim).
export function linear(x, T, { weight, bias }) {
  const [outDim, inDim] = weight.shape;
  const W = weight.data, out = new Float32Array(T * outDim);
  for (let o = 0; o < outDim; o++) {
    const w = o * inDim, b = bias.data[o];
    let t = 0;
    for (; t + 3 < T; t += 4) { // four tokens at a time: each weight is loaded once for all
      const r0 = t * inDim, r1 = r0 + inDim, r2 = r1 + inDim, r3 = r2 + inDim;
      let s0 = b, s1 = b, s2 = b, s3 = b;
      for (let i = 0; i < inDim; i++) {
        const wi = W[w + i];
        s0 += x[r0 + i] * wi;
        s1 += x[r1 + i] * wi;
        s2 += x[r2 + i] * wi;
        s3 += x[r3 + i] * wi;
      }
      out[t * outDim + o] = s0;
      out[(t + 1) * outDim + o] = s1;
      out[(t + 2) * outDim + o] = s2;
      out[(t + 3) * outDim + o] = s3;
    }
    for (; t < T; t++) {
      let sum = b;
      for (let i = 0; i < inDim; i++) sum += x[t * inDim + i] * W[w + i];
      out[t * outDim + o] = sum;
    }
  }
  return out; // (T, outDim)
}

// GPT-2's Conv1D: the same product with W stored transposed, (inDim, outDim).
export function conv1d(x, T, { weight, bias }) {
  const [inDim, outDim] = weight.shape;
  const W = weight.data, out = new Float32Array(T * outDim);
  const sum = new Float64Array(outDim);
  for (let t = 0; t < T; t++) {
    sum.set(bias.data);
    for (let i = 0; i < inDim; i++) {
      const xi = x[t * inDim + i], w = i * outDim;
      for (let o = 0; o < outDim; o++) sum[o] += xi * W[w + o];
    }
    out.set(sum, t * outDim);
  }
  return out; // (T, outDim)
}
// --8<-- [end:linear]

// --8<-- [start:layer_norm]
// Each row to mean 0 and variance 1 (the biased variance, as torch), then scale and shift.
export function layerNorm(x, T, { weight, bias }, eps) {
  const D = weight.shape[0], out = new Float32Array(T * D);
  for (let t = 0; t < T; t++) {
    const row = x.subarray(t * D, (t + 1) * D);
    let mean = 0, variance = 0;
    for (let d = 0; d < D; d++) mean += row[d];
    mean /= D;
    for (let d = 0; d < D; d++) variance += (row[d] - mean) ** 2;
    const scale = 1 / Math.sqrt(variance / D + eps);
    for (let d = 0; d < D; d++) {
      out[t * D + d] = (row[d] - mean) * scale * weight.data[d] + bias.data[d];
    }
  }
  return out;
}
// --8<-- [end:layer_norm]

// --8<-- [start:softmax]
// Softmax of row[0..n) in place, after subtracting the largest score (exp cannot overflow).
export function softmax(row, n = row.length) {
  let max = -Infinity, total = 0;
  for (let j = 0; j < n; j++) max = Math.max(max, row[j]);
  for (let j = 0; j < n; j++) total += (row[j] = Math.exp(row[j] - max));
  for (let j = 0; j < n; j++) row[j] /= total;
  return row;
}
// --8<-- [end:softmax]

// --8<-- [start:gelu]
// BERT's GELU, x Φ(x), with the exact erf. JavaScript has no Math.erf: its Taylor series
// below |x| = 4, and above, 1 - erfc(x) from the asymptotic series, both near float64.
export function erf(x) {
  const z = Math.abs(x);
  if (z < 4) {
    let term = z, total = z;
    for (let n = 1; Math.abs(term) > 1e-17 * Math.abs(total); n++) {
      term *= (-z * z) / n;
      total += term / (2 * n + 1);
    }
    return Math.sign(x) * total * (2 / Math.sqrt(Math.PI));
  }
  let term = 1, total = 1;
  for (let n = 1; n < 10; n++) {
    term *= -(2 * n - 1) / (2 * z * z);
    total += term;
  }
  return Math.sign(x) * (1 - (Math.exp(-z * z) / (z * Math.sqrt(Math.PI))) * total);
}

export const gelu = (x) => 0.5 * x * (1 + erf(x / Math.SQRT2));

// GPT-2's GELU ("gelu_new"): the tanh approximation.
export const geluTanh = (x) =>
  0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));
// --8<-- [end:gelu]

export function map(x, f) {
  for (let i = 0; i < x.length; i++) x[i] = f(x[i]);
  return x;
}

export function add(x, y) {
  for (let i = 0; i < x.length; i++) x[i] += y[i];
  return x;
}
