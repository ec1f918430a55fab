import { bootstrapCI, mean, type BootstrapOptions, type ConfidenceInterval } from '../metrics/summary';

/**
 * Paired comparisons of two configurations run on the same instances (CodeGrep §5.3: pooled efficiency mixes
 * a per-issue effect with a selection effect, so efficiency is also compared on the instances both resolve).
 */

/** How two configurations' binary outcomes split over the instances both were run on. Ids are sorted. */
export interface PairedSplit {
  /** Instances present in both. */
  common: string[];
  both: string[];
  /** true under the first configuration only (McNemar's b when the first is the baseline). */
  firstOnly: string[];
  /** true under the second configuration only (McNemar's c). */
  secondOnly: string[];
  neither: string[];
}

export function splitPaired(first: ReadonlyMap<string, boolean>, second: ReadonlyMap<string, boolean>): PairedSplit {
  const split: PairedSplit = { common: [], both: [], firstOnly: [], secondOnly: [], neither: [] };
  for (const id of [...first.keys()].sort()) {
    const b = second.get(id);
    if (b === undefined) continue;
    const a = first.get(id)!;
    split.common.push(id);
    if (a && b) split.both.push(id);
    else if (a) split.firstOnly.push(id);
    else if (b) split.secondOnly.push(id);
    else split.neither.push(id);
  }
  return split;
}

/** Means of one quantity under two configurations over the same instances. */
export interface PairedMeans {
  n: number;
  first: number | null;
  second: number | null;
  /** second / first − 1; null when n = 0 or the first mean is 0. */
  relativeChange: number | null;
  /** Percentile bootstrap of the mean per-instance difference (second − first), resampling instances. */
  differenceInterval: ConfidenceInterval | null;
}

/**
 * Compares `first` and `second` on exactly `ids` (each id must have a value in both maps; a missing one is a
 * caller error and throws naming it).
 */
export function pairedMeans(
  ids: readonly string[],
  first: ReadonlyMap<string, number>,
  second: ReadonlyMap<string, number>,
  bootstrap: BootstrapOptions = {},
): PairedMeans {
  if (ids.length === 0) return { n: 0, first: null, second: null, relativeChange: null, differenceInterval: null };
  const a: number[] = [];
  const b: number[] = [];
  for (const id of ids) {
    const x = first.get(id);
    const y = second.get(id);
    if (x === undefined || y === undefined) {
      throw new RangeError(
        `pairedMeans: instance ${JSON.stringify(id)} has no value under the ${x === undefined ? 'first' : 'second'} configuration`,
      );
    }
    a.push(x);
    b.push(y);
  }
  const meanA = mean(a);
  const meanB = mean(b);
  const differences = b.map((y, i) => y - a[i]!);
  return {
    n: ids.length,
    first: meanA,
    second: meanB,
    relativeChange: meanA === 0 ? null : meanB / meanA - 1,
    differenceInterval: bootstrapCI(differences, bootstrap),
  };
}
