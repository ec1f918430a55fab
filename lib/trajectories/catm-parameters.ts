/**
 * The numeric parameters of CATM (CodeGrep §3.4), defined here and nowhere else.
 */

/**
 * Candidates whose post-reasoning has fewer Qwen3 tokens than this are dropped before judging
 * (CodeGrep App. A.3, Table 5: "judge thresholds: reasoning_tokens ≥ 30").
 */
export const MIN_REASONING_TOKENS = 30;

/**
 * A judged-relevant file enters the target set G(x) only if its normalised weight w(f) = w̃(f)/µraw is at
 * least this (CodeGrep §3.4 "G(x) = Gpatch(x) ∪ {f ∈ L(x) : wf ≥ 0.15}"; App. A.2 "Files with w < 0.15 are
 * discarded"; Table 5 "w ≥ 0.15"). The comparison is inclusive: exactly 0.15 is kept.
 */
export const MIN_LABEL_WEIGHT = 0.15;
