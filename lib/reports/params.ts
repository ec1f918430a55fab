/**
 * Parameters of the evaluation report. Each lives here and nowhere else; the scores' own parameters (β, the
 * Fβ ≥ 0.8 threshold, bootstrap defaults) are lib/metrics/params.ts's.
 */

/**
 * Cut-offs of Acc@k over a ranked file list. CodeScout App. G (Table 10) compares ranked-list scaffolds at
 * K = 1, 3 and "all", where "all" is their default K = 5; the per-instance metrics have one column per k.
 */
export const ACCURACY_AT_K = [1, 3, 5] as const;
export type AccuracyCutoff = (typeof ACCURACY_AT_K)[number];

/** How many files ranked retrievers (BM25, dense) rank for Acc@k, whatever K they return as their answer. */
export const RANKED_DEPTH = Math.max(...ACCURACY_AT_K);

/** Bins of the per-instance Fβ histogram in the HTML report (width 0.1 over [0, 1]). */
export const HISTOGRAM_BINS = 10;
