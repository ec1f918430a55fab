/**
 * Sentence-transformers' Pooling and Normalize modules over a batch of token embeddings
 * (`last_hidden_state`, row-major [batch, sequence, hidden]). Modes are applied in sentence-transformers'
 * order and concatenated when several are on, exactly as its Pooling.forward does: cls, max, mean,
 * mean_sqrt_len, lasttoken.
 */

export const POOLING_MODES = ['cls', 'max', 'mean', 'mean_sqrt_len', 'lasttoken'] as const;
export type PoolingMode = (typeof POOLING_MODES)[number];

export interface TokenEmbeddings {
  /** [batch, sequence, hidden], row-major. */
  data: Float32Array;
  batch: number;
  sequence: number;
  hidden: number;
  /** [batch, sequence]: 1 for a real token, 0 for padding. Padding is assumed on the right. */
  mask: Uint8Array;
}

/** One pooled vector per sequence, each `hidden × modes.length` long. */
export function poolTokenEmbeddings(tokens: TokenEmbeddings, modes: readonly PoolingMode[]): Float32Array[] {
  const { data, batch, sequence, hidden, mask } = tokens;
  if (modes.length === 0) throw new Error('poolTokenEmbeddings: no pooling mode given');
  if (data.length !== batch * sequence * hidden) {
    throw new Error(`poolTokenEmbeddings: ${data.length} values do not make a [${batch}, ${sequence}, ${hidden}] tensor`);
  }
  if (mask.length !== batch * sequence)
    throw new Error(`poolTokenEmbeddings: mask has ${mask.length} entries, expected ${batch * sequence}`);
  const ordered = POOLING_MODES.filter((m) => modes.includes(m));
  const out: Float32Array[] = [];
  for (let b = 0; b < batch; b++) {
    let count = 0;
    let last = -1;
    for (let t = 0; t < sequence; t++) {
      if (mask[b * sequence + t]) {
        count++;
        last = t;
      }
    }
    if (count === 0) throw new Error(`poolTokenEmbeddings: sequence ${b} of the batch has no unmasked token`);
    const vector = new Float32Array(hidden * ordered.length);
    ordered.forEach((mode, m) => {
      const target = vector.subarray(m * hidden, (m + 1) * hidden);
      const row = (t: number): number => (b * sequence + t) * hidden;
      if (mode === 'cls') target.set(data.subarray(row(0), row(0) + hidden));
      else if (mode === 'lasttoken') target.set(data.subarray(row(last), row(last) + hidden));
      else if (mode === 'max') {
        target.fill(-Infinity);
        for (let t = 0; t < sequence; t++) {
          if (!mask[b * sequence + t]) continue;
          const r = row(t);
          for (let h = 0; h < hidden; h++) if (data[r + h]! > target[h]!) target[h] = data[r + h]!;
        }
      } else {
        // Summed in float64, then divided: the count (mean) or its square root (mean_sqrt_len).
        const sum = new Float64Array(hidden);
        for (let t = 0; t < sequence; t++) {
          if (!mask[b * sequence + t]) continue;
          const r = row(t);
          for (let h = 0; h < hidden; h++) sum[h]! += data[r + h]!;
        }
        const divisor = mode === 'mean' ? count : Math.sqrt(count);
        for (let h = 0; h < hidden; h++) target[h] = sum[h]! / divisor;
      }
    });
    out.push(vector);
  }
  return out;
}

/** Scales `vector` in place to unit L2 norm (torch.nn.functional.normalize: a zero vector stays zero). */
export function l2NormalizeInPlace(vector: Float32Array): Float32Array {
  let squares = 0;
  for (let i = 0; i < vector.length; i++) squares += vector[i]! * vector[i]!;
  const norm = Math.max(Math.sqrt(squares), 1e-12);
  for (let i = 0; i < vector.length; i++) vector[i] = vector[i]! / norm;
  return vector;
}
