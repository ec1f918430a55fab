/**
 * Every parameter of the training rewards, in one place. The Fβ β and the line-range coverage threshold are
 * shared with the evaluation and live in lib/metrics/params.ts; they are re-exported here so a reader of the
 * rewards sees all of them.
 */
export { F_BETA, LINE_RANGE_MIN_GOLD_COVERAGE } from '../metrics/params';

/**
 * c̄ at which the efficiency signal saturates: "We treat c̄ = 4 as the natural saturation point" — half the
 * per-turn budget of 8 parallel calls. CodeGrep §3.5, Eq. 5 (σv1 = 1/max(1, c̄/4)) and Eq. 7
 * (s(c̄) = sqrt(min(c̄/4, 1))).
 */
export const TOOL_CALLS_PER_TURN_SATURATION = 4;

/** Weights of CodeScout's Eq. 1: r = F1(file) + F1(module) + F1(function). CodeScout §3.3. */
export const CODESCOUT_LEVEL_WEIGHTS = { file: 1, module: 1, function: 1 } as const;

/**
 * CodeScout's auxiliary turn reward: +1 iff the agent terminates in exactly k turns, k = the step limit
 * (used for CodeScout-14B). CodeScout §3.3.
 */
export const CODESCOUT_TURN_BONUS = 1;
