/**
 * Parameters of the retrieval-quality scores. Each lives here and nowhere else.
 */

/**
 * β of the precision-biased Fβ used for file-level and line-range scores, in the rewards and in the
 * evaluation. CodeGrep §3.5 ("two precision-biased Fβ statistics (β = 0.5)"), App. B, §4.2.
 */
export const F_BETA = 0.5;

/**
 * A predicted line range matches a gold range when it covers at least this share of the gold range's lines.
 * CodeGrep App. B, condition (b): |[p.s, p.e] ∩ [g.s, g.e]| / (g.e − g.s + 1) ≥ 0.5.
 */
export const LINE_RANGE_MIN_GOLD_COVERAGE = 0.5;

/** "High-quality retrieval" threshold of the Fβ ≥ 0.8 column. CodeGrep §4.2, Table 2. */
export const HIGH_QUALITY_F_THRESHOLD = 0.8;

/** Bootstrap defaults for confidence intervals (percentile method): the evaluation config's, defined with it. */
export { BOOTSTRAP_CONFIDENCE, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED } from '../../schemas/evaluation/bootstrap-defaults';
