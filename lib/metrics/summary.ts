import { BOOTSTRAP_CONFIDENCE, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, HIGH_QUALITY_F_THRESHOLD } from './params';
import { seededRandom } from './seeded-random';

/** Summary of per-instance values (CodeGrep §4.2, Table 2: mean, median, share with Fβ ≥ 0.8). */
export interface Summary {
  n: number;
  /** null when n = 0. */
  mean: number | null;
  median: number | null;
  /** Share of values ≥ `threshold` (0..1); null when n = 0. */
  shareAtLeast: number | null;
  threshold: number;
}

function checkValues(values: readonly number[], what: string): void {
  values.forEach((v, i) => {
    if (!Number.isFinite(v)) throw new RangeError(`${what}: value #${i} is not a finite number (${v})`);
  });
}

export function mean(values: readonly number[]): number {
  let sum = 0;
  for (const v of values) sum += v;
  return sum / values.length;
}

/** Median; the mean of the two middle values for an even count. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function summarize(values: readonly number[], threshold: number = HIGH_QUALITY_F_THRESHOLD): Summary {
  checkValues(values, 'summarize');
  if (values.length === 0) return { n: 0, mean: null, median: null, shareAtLeast: null, threshold };
  let atLeast = 0;
  for (const v of values) if (v >= threshold) atLeast++;
  return { n: values.length, mean: mean(values), median: median(values), shareAtLeast: atLeast / values.length, threshold };
}

/** Quantile with linear interpolation between order statistics (numpy's default, "type 7"). */
export function quantile(sortedValues: readonly number[], q: number): number {
  if (sortedValues.length === 0) throw new RangeError('quantile of an empty list');
  const position = (sortedValues.length - 1) * q;
  const lower = Math.floor(position);
  const upper = Math.ceil(position);
  const lo = sortedValues[lower]!;
  return lo + (sortedValues[upper]! - lo) * (position - lower);
}

export interface BootstrapOptions {
  /** Resamples B (default 1000). */
  resamples?: number;
  /** Confidence level (default 0.95). */
  confidence?: number;
  seed?: number;
  /** The statistic (default: mean). */
  statistic?: (sample: readonly number[]) => number;
}

export interface ConfidenceInterval {
  estimate: number;
  low: number;
  high: number;
  confidence: number;
  resamples: number;
  seed: number;
}

/**
 * Percentile bootstrap CI: draw B resamples of size n with replacement (seeded, so the interval is
 * reproducible), compute the statistic on each, and take the (1−c)/2 and (1+c)/2 quantiles of the B values.
 * `estimate` is the statistic on the original values. Throws on an empty input: there is no interval.
 */
export function bootstrapCI(values: readonly number[], opts: BootstrapOptions = {}): ConfidenceInterval {
  checkValues(values, 'bootstrapCI');
  const resamples = opts.resamples ?? BOOTSTRAP_RESAMPLES;
  const confidence = opts.confidence ?? BOOTSTRAP_CONFIDENCE;
  const seed = opts.seed ?? BOOTSTRAP_SEED;
  const statistic = opts.statistic ?? mean;
  if (values.length === 0) throw new RangeError('bootstrapCI needs at least one value');
  if (!Number.isInteger(resamples) || resamples < 1) throw new RangeError(`resamples must be a positive integer, got ${resamples}`);
  if (!(confidence > 0 && confidence < 1)) throw new RangeError(`confidence must be in (0, 1), got ${confidence}`);
  const random = seededRandom(seed);
  const n = values.length;
  const sample = new Array<number>(n);
  const stats = new Array<number>(resamples);
  for (let r = 0; r < resamples; r++) {
    for (let i = 0; i < n; i++) sample[i] = values[Math.floor(random() * n)]!;
    stats[r] = statistic(sample);
  }
  stats.sort((a, b) => a - b);
  const alpha = 1 - confidence;
  return {
    estimate: statistic(values),
    low: quantile(stats, alpha / 2),
    high: quantile(stats, 1 - alpha / 2),
    confidence,
    resamples,
    seed,
  };
}
