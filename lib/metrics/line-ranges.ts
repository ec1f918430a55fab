import { normalizeRepoPath } from '../paths/normalize';
import { F_BETA, LINE_RANGE_MIN_GOLD_COVERAGE } from './params';
import { scoresFromCounts, type SetScores } from './set-scores';

/** An inclusive, 1-based line range of one file. */
export interface LineRange {
  /** Repository-relative path (the same shape as schemas/ground-truth.ts's GoldLineRange). */
  path: string;
  start: number;
  end: number;
}

export interface LineRangeMatch {
  /** Index into the scored predictions (after CATM-only ranges are dropped). */
  predicted: number;
  /** Index into the gold ranges. */
  gold: number;
}

export interface LineRangeScores extends SetScores {
  /** The predicted ranges that were scored, in order (CATM-only ranges removed, paths normalised). */
  scored: LineRange[];
  /** How many predicted ranges were dropped because their file is CATM-only (App. B, merge mode). */
  droppedCatmOnly: number;
  matches: LineRangeMatch[];
}

export interface LineRangeOptions {
  beta?: number;
  /**
   * Files of the target set G(x) that are not gold-patch files (CodeGrep §3.4: G = Gpatch ∪ surviving CATM
   * files). Predicted ranges on these files are dropped before scoring (App. B, "Under merge mode"). Use
   * `catmOnlyFiles(target, patch)` to compute them.
   */
  catmOnlyFiles?: Iterable<string>;
}

/** G(x) \ Gpatch(x): target files that came only from CATM mining, after path normalisation. */
export function catmOnlyFiles(targetFiles: Iterable<string>, patchFiles: Iterable<string>): string[] {
  const patch = new Set<string>();
  for (const f of patchFiles) patch.add(normalizeRepoPath(f));
  const out: string[] = [];
  const seen = new Set<string>();
  for (const f of targetFiles) {
    const p = normalizeRepoPath(f);
    if (p === '' || patch.has(p) || seen.has(p)) continue;
    seen.add(p);
    out.push(p);
  }
  return out;
}

function checkRange(range: LineRange, what: string, index: number): LineRange {
  const { start, end } = range;
  if (!Number.isInteger(start) || !Number.isInteger(end) || start < 1 || end < start) {
    throw new RangeError(
      `${what} line range #${index} (${JSON.stringify(range)}) is invalid: start and end must be integers with 1 <= start <= end`,
    );
  }
  return { path: normalizeRepoPath(range.path), start, end };
}

/** Share of gold range g covered by prediction p: |[p.s, p.e] ∩ [g.s, g.e]| / (g.e − g.s + 1). App. B (b). */
export function goldCoverage(p: LineRange, g: LineRange): number {
  const overlap = Math.min(p.end, g.end) - Math.max(p.start, g.start) + 1;
  return overlap <= 0 ? 0 : overlap / (g.end - g.start + 1);
}

/** App. B: p matches g iff (a) same file and (b) p covers at least half of g. */
export function rangeMatches(p: LineRange, g: LineRange): boolean {
  return p.path === g.path && goldCoverage(p, g) >= LINE_RANGE_MIN_GOLD_COVERAGE;
}

/**
 * Line-range Fβ (CodeGrep §3.5, App. B). Matching is greedy and one-to-one, exactly in App. B's order:
 * predictions are taken in the order given; each pairs with the FIRST gold range, in gold order, that is
 * still unpaired and that it matches (same file, covers ≥ 50% of the gold range; App. B's "overlaps" is
 * read as "matches", so a prediction touching a gold range by less than half does not consume it); both are
 * then removed. TP = matched pairs, precision = TP/|Pr|, recall = TP/|Gr|, with the same empty-set cases as
 * the file score. Pr is a list: a repeated predicted range is scored twice (and can match at most one more
 * gold range). Under merge mode, predicted ranges on CATM-only files are dropped before scoring.
 */
export function lineRangeScores(predicted: readonly LineRange[], gold: readonly LineRange[], opts: LineRangeOptions = {}): LineRangeScores {
  const beta = opts.beta ?? F_BETA;
  const dropped = new Set<string>();
  for (const f of opts.catmOnlyFiles ?? []) dropped.add(normalizeRepoPath(f));
  const goldRanges = gold.map((g, i) => checkRange(g, 'gold', i));
  const scored: LineRange[] = [];
  let droppedCatmOnly = 0;
  predicted.forEach((p, i) => {
    const range = checkRange(p, 'predicted', i);
    if (dropped.has(range.path)) droppedCatmOnly++;
    else scored.push(range);
  });
  const paired = new Array<boolean>(goldRanges.length).fill(false);
  const matches: LineRangeMatch[] = [];
  scored.forEach((p, pi) => {
    for (let gi = 0; gi < goldRanges.length; gi++) {
      if (!paired[gi] && rangeMatches(p, goldRanges[gi]!)) {
        paired[gi] = true;
        matches.push({ predicted: pi, gold: gi });
        return;
      }
    }
  });
  const scores = scoresFromCounts(matches.length, scored.length, goldRanges.length, beta);
  return { ...scores, scored, droppedCatmOnly, matches };
}
