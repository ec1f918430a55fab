import { F_BETA } from './params';

/** Counts and scores of a predicted set against a gold set. */
export interface SetScores {
  tp: number;
  fp: number;
  fn: number;
  precision: number;
  recall: number;
  /** Fβ at `beta`. */
  f: number;
  beta: number;
}

/**
 * Fβ from precision and recall: (1 + β²)·P·R / (β²·P + R), 0 when P = R = 0. CodeGrep App. B.
 * The degenerate empty-set cases are decided by the callers, which know the set sizes.
 */
export function fBetaFromPrecisionRecall(precision: number, recall: number, beta: number): number {
  const b2 = beta * beta;
  const denominator = b2 * precision + recall;
  return denominator === 0 ? 0 : ((1 + b2) * precision * recall) / denominator;
}

/**
 * Scores from counts, with CodeGrep App. B's degenerate cases: both sets empty → P = R = F = 1; exactly one
 * empty → F = 0 (and P = R = 0). Precision of an empty prediction and recall against an empty gold set are
 * 0 unless both are empty.
 */
export function scoresFromCounts(tp: number, predictedSize: number, goldSize: number, beta: number = F_BETA): SetScores {
  if (!(beta > 0) || !Number.isFinite(beta)) throw new RangeError(`beta must be a positive finite number, got ${beta}`);
  if (tp > predictedSize || tp > goldSize || tp < 0) {
    throw new RangeError(`inconsistent counts: tp=${tp}, predicted=${predictedSize}, gold=${goldSize}`);
  }
  const fp = predictedSize - tp;
  const fn = goldSize - tp;
  if (predictedSize === 0 && goldSize === 0) return { tp, fp, fn, precision: 1, recall: 1, f: 1, beta };
  if (predictedSize === 0 || goldSize === 0) return { tp, fp, fn, precision: 0, recall: 0, f: 0, beta };
  const precision = tp / predictedSize;
  const recall = tp / goldSize;
  return { tp, fp, fn, precision, recall, f: fBetaFromPrecisionRecall(precision, recall, beta), beta };
}

/**
 * Set precision / recall / Fβ over exact strings. Repeats count once (these are sets); normalising paths or
 * entity ids is the caller's job (see `fileScores` and `entityScores`, which do it).
 */
export function setScores(predicted: Iterable<string>, gold: Iterable<string>, beta: number = F_BETA): SetScores {
  const p = new Set(predicted);
  const g = new Set(gold);
  let tp = 0;
  for (const x of p) if (g.has(x)) tp++;
  return scoresFromCounts(tp, p.size, g.size, beta);
}
