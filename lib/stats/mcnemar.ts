/**
 * McNemar's exact test for two paired binary outcomes (here: resolved under the baseline vs under another
 * configuration, instance by instance). Only the discordant pairs carry information: b = resolved by the
 * first only, c = resolved by the second only. Under H0 (no difference) each discordant pair falls either
 * way with probability ½, so min(b, c) ~ Binomial(b + c, ½), and the two-sided p-value is
 *
 *     p = min(1, 2 · Σ_{i ≤ min(b,c)} C(b+c, i) / 2^(b+c))
 *
 * (as the downstream-evaluation issue specifies; the papers report resolve rates without a test). With no
 * discordant pair there is no evidence either way: p = 1.
 */
export interface McNemarResult {
  b: number;
  c: number;
  /** Discordant pairs, b + c. */
  discordant: number;
  pValue: number;
}

function checkCount(value: number, name: string): void {
  if (!Number.isInteger(value) || value < 0) throw new RangeError(`mcnemarExact: ${name} must be a non-negative integer, got ${value}`);
}

export function mcnemarExact(b: number, c: number): McNemarResult {
  checkCount(b, 'b');
  checkCount(c, 'c');
  const n = b + c;
  return { b, c, discordant: n, pValue: Math.min(1, 2 * binomialLowerTailHalf(n, Math.min(b, c))) };
}

/**
 * P(X ≤ k) for X ~ Binomial(n, ½), summed in log space so n in the thousands neither overflows C(n, i) nor
 * underflows 2^−n: log C(n, i) is built up term by term and each term is exponentiated relative to the largest.
 */
export function binomialLowerTailHalf(n: number, k: number): number {
  checkCount(n, 'n');
  if (!Number.isInteger(k)) throw new RangeError(`binomialLowerTailHalf: k must be an integer, got ${k}`);
  if (k < 0) return 0;
  if (k >= n) return 1;
  const logTerms: number[] = [];
  let logChoose = 0; // log C(n, 0)
  for (let i = 0; i <= k; i++) {
    if (i > 0) logChoose += Math.log(n - i + 1) - Math.log(i);
    logTerms.push(logChoose);
  }
  const largest = Math.max(...logTerms);
  let scaled = 0;
  for (const t of logTerms) scaled += Math.exp(t - largest);
  return Math.min(1, Math.exp(largest + Math.log(scaled) - n * Math.LN2));
}
