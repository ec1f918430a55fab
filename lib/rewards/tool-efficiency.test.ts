import { describe, expect, it } from 'vitest';
import { TOOL_CALLS_PER_TURN_SATURATION } from './params';
import { advantageScale, rewardScaleV1, toolCallsPerTurn, usedToolsMask } from './tool-efficiency';

describe('efficiency signal (CodeGrep §3.5, Eq. 3, 5, 7)', () => {
  it('c̄ = tool calls / turns', () => {
    expect(toolCallsPerTurn({ toolCalls: 0, turns: 1 })).toBe(0);
    expect(toolCallsPerTurn({ toolCalls: 7, turns: 2 })).toBe(3.5);
    expect(toolCallsPerTurn({ toolCalls: 32, turns: 4 })).toBe(8);
  });

  it('rejects a rollout without turns and bad counts', () => {
    expect(() => toolCallsPerTurn({ toolCalls: 0, turns: 0 })).toThrow(/turns must be an integer >= 1/);
    expect(() => toolCallsPerTurn({ toolCalls: -1, turns: 2 })).toThrow(/toolCalls/);
    expect(() => toolCallsPerTurn({ toolCalls: 1.5, turns: 2 })).toThrow(/toolCalls/);
  });

  it('saturates at c̄ = 4', () => {
    expect(TOOL_CALLS_PER_TURN_SATURATION).toBe(4);
  });

  it('σv1 = 1/max(1, c̄/4): no discount up to 4, then 4/c̄', () => {
    expect([0, 1, 4, 6, 8].map(rewardScaleV1)).toEqual([1, 1, 1, 4 / 6, 0.5]);
  });

  it('s(c̄) = sqrt(min(c̄/4, 1)): 0.5 at c̄ = 1 as §3.5 says, 1 from c̄ = 4', () => {
    expect([0, 1, 4, 8].map(advantageScale)).toEqual([0, 0.5, 1, 1]);
    expect(advantageScale(2)).toBeCloseTo(Math.SQRT1_2, 15);
  });

  it('the mask 1[c̄ > 0]', () => {
    expect([0, 0.25, 1, 8].map(usedToolsMask)).toEqual([0, 1, 1, 1]);
  });
});
