import { F_BETA } from './params';
import { setScores, type SetScores } from './set-scores';

/**
 * Metrics for retrievers that return a ranked list. Callers pass lists already normalised and de-duplicated
 * (`dedupePaths` / `dedupeEntityIds` keep the rank order), so a repeated entry never takes a slot.
 */

function checkK(k: number): void {
  if (!Number.isInteger(k) || k < 1) throw new RangeError(`k must be a positive integer, got ${k}`);
}

/** The first k entries of a ranked list (fewer when the list is shorter). */
export function topK<T>(ranked: readonly T[], k: number): T[] {
  checkK(k);
  return ranked.slice(0, k);
}

export interface AccuracyAtK {
  k: number;
  /** 1 when every gold item is among the top k, else 0. */
  accuracy: 0 | 1;
  /** Gold items found among the top k. */
  found: number;
  goldSize: number;
}

/**
 * Acc@k as in the localisation literature CodeScout App. G compares against (LocAgent, Agentless): an
 * instance counts as correct at k when ALL its gold items are among the first k predictions. With an empty
 * gold set the condition holds vacuously (accuracy 1).
 */
export function accuracyAtK(ranked: readonly string[], gold: Iterable<string>, k: number): AccuracyAtK {
  const cut = new Set(topK(ranked, k));
  const goldSet = new Set(gold);
  let found = 0;
  for (const g of goldSet) if (cut.has(g)) found++;
  return { k, accuracy: found === goldSet.size ? 1 : 0, found, goldSize: goldSet.size };
}

/**
 * Return@K (CodeScout App. G, Table 10): cut the ranked list to its first K entries and score the cut as a
 * set (precision, recall, Fβ; pass beta = 1 for the F1 the table reports).
 */
export function returnAtK(ranked: readonly string[], gold: Iterable<string>, k: number, beta: number = F_BETA): SetScores {
  return setScores(topK(ranked, k), gold, beta);
}
