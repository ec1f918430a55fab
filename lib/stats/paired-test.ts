import { seededRandom } from '../metrics/seeded-random';

/** The default number of random sign flips of `pairedSignFlipTest`: p-values down to ~5e-5 are resolvable. */
export const SIGN_FLIP_RESAMPLES = 20_000;
export const SIGN_FLIP_SEED = 0x51_9e;

export interface PairedTestResult {
  n: number;
  meanBefore: number;
  meanAfter: number;
  /** mean(after − before). */
  meanDifference: number;
  /** One-sided p-value of H1: after > before. */
  pValue: number;
  resamples: number;
}

/**
 * One-sided paired sign-flip permutation test (Fisher's randomisation test on paired differences): under H0 the
 * sign of each per-instance difference d_i = after_i − before_i is exchangeable, so the observed mean difference is
 * compared with the means of `resamples` seeded random sign assignments; p = (hits + 1) / (resamples + 1), hits =
 * resampled means ≥ the observed one. No distributional assumption (rewards are bounded and often discrete, where a
 * t-test's normality is doubtful). Used to decide whether a trained policy beats its start on held-out instances.
 */
export function pairedSignFlipTest(
  before: readonly number[],
  after: readonly number[],
  options: { resamples?: number; seed?: number } = {},
): PairedTestResult {
  if (before.length !== after.length) {
    throw new RangeError(`pairedSignFlipTest: ${before.length} values before but ${after.length} after; pairs must match`);
  }
  if (before.length === 0) throw new RangeError('pairedSignFlipTest: no pairs');
  const resamples = options.resamples ?? SIGN_FLIP_RESAMPLES;
  if (!Number.isInteger(resamples) || resamples < 1)
    throw new RangeError(`pairedSignFlipTest: resamples must be a positive integer, got ${resamples}`);
  const differences = before.map((b, i) => {
    const a = after[i]!;
    if (!Number.isFinite(a) || !Number.isFinite(b)) throw new RangeError(`pairedSignFlipTest: pair ${i} is not finite (${b}, ${a})`);
    return a - b;
  });
  const n = differences.length;
  const sum = (xs: readonly number[]): number => xs.reduce((s, x) => s + x, 0);
  const observed = sum(differences);
  const random = seededRandom(options.seed ?? SIGN_FLIP_SEED);
  // Float sums of the same magnitudes in another order may differ in the last bits: a tie counts as a hit.
  const tolerance = 1e-9 * Math.max(1, sum(differences.map(Math.abs)));
  let hits = 0;
  for (let r = 0; r < resamples; r++) {
    let s = 0;
    for (const d of differences) s += random() < 0.5 ? -d : d;
    if (s >= observed - tolerance) hits++;
  }
  return {
    n,
    meanBefore: sum(before) / n,
    meanAfter: sum(after) / n,
    meanDifference: observed / n,
    pValue: (hits + 1) / (resamples + 1),
    resamples,
  };
}
