import { describe, expect, it } from 'vitest';
import { codeGrepReward, type CodeGrepRewardInput } from './codegrep';

// Target G = Gpatch ∪ {catm.py}. Files: predicted {a.py, x.py} vs G {a.py, b.py, catm.py}:
//   P 1/2, R 1/3 → Fβ = 1.25·(1/6)/(1/8 + 1/3) = 5/11.
// Ranges: a.py 12-20 covers gold a.py 10-19 by 8/10 (match); catm.py is CATM-only (dropped); x.py is a
//   false positive → P 1/2, R 1/2 → Flr = 1/2. Base ½(5/11 + 1/2) = 21/44.
const episode: Omit<CodeGrepRewardInput, 'toolCalls' | 'turns'> = {
  predictedFiles: ['a.py', 'x.py'],
  predictedLineRanges: [
    { path: 'a.py', start: 12, end: 20 },
    { path: 'catm.py', start: 1, end: 50 },
    { path: 'x.py', start: 1, end: 3 },
  ],
  targetFiles: ['a.py', 'b.py', 'catm.py'],
  patchFiles: ['a.py', 'b.py'],
  goldLineRanges: [
    { path: 'a.py', start: 10, end: 19 },
    { path: 'b.py', start: 1, end: 4 },
  ],
};
const FILE_F = 5 / 11;
const BASE = 21 / 44;

// Rollouts with c̄ = 0, 1, 4 and 8.
const rollouts = [
  { cBar: 0, toolCalls: 0, turns: 2 },
  { cBar: 1, toolCalls: 3, turns: 3 },
  { cBar: 4, toolCalls: 8, turns: 2 },
  { cBar: 8, toolCalls: 32, turns: 4 },
];

describe('CodeGrep rewards (§3.5, Table 1)', () => {
  it('components are hand-computed correctly', () => {
    const r = codeGrepReward('v1', { ...episode, toolCalls: 3, turns: 3 });
    expect(r.components.file.f).toBeCloseTo(FILE_F, 15);
    expect(r.components.lineRange).toMatchObject({ tp: 1, fp: 1, fn: 1, droppedCatmOnly: 1, f: 0.5 });
    expect(r.components.base).toBeCloseTo(BASE, 15);
  });

  it.each([
    [0, BASE],
    [1, BASE],
    [4, BASE],
    [8, BASE / 2],
  ])('v1 at c̄ = %d: ½(Ffile + Flr)·1/max(1, c̄/4), advantage unscaled', (cBar, expected) => {
    const rollout = rollouts.find((x) => x.cBar === cBar)!;
    const r = codeGrepReward('v1', { ...episode, ...rollout });
    expect(r.toolCallsPerTurn).toBe(cBar);
    expect(r.total).toBeCloseTo(expected, 15);
    expect(r.advantageScale).toBe(1);
    expect(r.components.mask).toBe(1);
  });

  it.each([
    [0, 0, 0],
    [1, BASE, 0.5],
    [4, BASE, 1],
    [8, BASE, 1],
  ])('v2 at c̄ = %d: ½(Ffile + Flr)·1[c̄>0] = %s, advantage × s(c̄) = %s', (cBar, expected, scale) => {
    const rollout = rollouts.find((x) => x.cBar === cBar)!;
    const r = codeGrepReward('v2', { ...episode, ...rollout });
    expect(r.total).toBeCloseTo(expected, 15);
    expect(r.advantageScale).toBe(scale);
    expect(r.components.rewardScale).toBe(1);
  });

  it.each([
    [0, 0, 0],
    [1, FILE_F, 0.5],
    [4, FILE_F, 1],
    [8, FILE_F, 1],
  ])('v3 at c̄ = %d: Ffile·1[c̄>0] = %s, advantage × s(c̄) = %s, no line-range term', (cBar, expected, scale) => {
    const rollout = rollouts.find((x) => x.cBar === cBar)!;
    const r = codeGrepReward('v3', { ...episode, ...rollout });
    expect(r.total).toBeCloseTo(expected, 15);
    expect(r.advantageScale).toBe(scale);
    expect(r.components.lineRange).toBeUndefined();
  });

  it('v3 ignores line ranges entirely, v1/v2 do not', () => {
    const noRanges = { ...episode, predictedLineRanges: [], toolCalls: 4, turns: 1 };
    expect(codeGrepReward('v3', noRanges).total).toBeCloseTo(FILE_F, 15);
    expect(codeGrepReward('v2', noRanges).total).toBeCloseTo(FILE_F / 2, 15);
  });

  it('scores CATM files as hard positives at file level (G is the target)', () => {
    const r = codeGrepReward('v3', { ...episode, predictedFiles: ['a.py', 'b.py', 'catm.py'], toolCalls: 4, turns: 1 });
    expect(r.total).toBe(1);
  });

  it('follows App. B’s empty cases: nothing to find and nothing predicted scores 1', () => {
    const r = codeGrepReward('v2', { predictedFiles: [], targetFiles: [], patchFiles: [], toolCalls: 2, turns: 1 });
    expect(r.total).toBe(1);
    const miss = codeGrepReward('v1', { ...episode, predictedFiles: [], predictedLineRanges: [], toolCalls: 1, turns: 1 });
    expect(miss.total).toBe(0);
  });

  it('rejects an unknown version and a rollout with no turns', () => {
    expect(() => codeGrepReward('v4' as 'v1', { ...episode, toolCalls: 1, turns: 1 })).toThrow(/unknown CodeGrep reward version/);
    expect(() => codeGrepReward('v1', { ...episode, toolCalls: 1, turns: 0 })).toThrow(/turns/);
  });
});
