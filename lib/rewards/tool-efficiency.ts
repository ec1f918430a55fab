import { TOOL_CALLS_PER_TURN_SATURATION } from './params';

/** What a rollout did, as the efficiency signal needs it. */
export interface RolloutActivity {
  /** C_total: tool calls issued over the whole rollout. */
  toolCalls: number;
  /** T: turns (model messages) in the rollout, at least 1. */
  turns: number;
}

/** c̄ = C_total / T (CodeGrep §3.5, Eq. 3). Throws on a rollout with no turns or negative/non-integer counts. */
export function toolCallsPerTurn({ toolCalls, turns }: RolloutActivity): number {
  if (!Number.isInteger(turns) || turns < 1) throw new RangeError(`turns must be an integer >= 1 (Eq. 3: T >= 1), got ${turns}`);
  if (!Number.isInteger(toolCalls) || toolCalls < 0) throw new RangeError(`toolCalls must be a non-negative integer, got ${toolCalls}`);
  return toolCalls / turns;
}

/** v1's reward-layer scale σv1(c̄) = 1 / max(1, c̄/4): no discount up to c̄ = 4. CodeGrep §3.5, Eq. 5. */
export function rewardScaleV1(cBar: number): number {
  return 1 / Math.max(1, cBar / TOOL_CALLS_PER_TURN_SATURATION);
}

/** v2/v3's advantage scale s(c̄) = sqrt(min(c̄/4, 1)): 0.5 at c̄ = 1, 1 from c̄ = 4. CodeGrep §3.5, Eq. 7. */
export function advantageScale(cBar: number): number {
  return Math.sqrt(Math.min(cBar / TOOL_CALLS_PER_TURN_SATURATION, 1));
}

/** The hard mask 1[c̄ > 0] of v2 and v3 (Eq. 6, 8): a rollout that never calls a tool earns nothing. */
export function usedToolsMask(cBar: number): 0 | 1 {
  return cBar > 0 ? 1 : 0;
}
