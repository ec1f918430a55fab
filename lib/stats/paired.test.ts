import { describe, expect, it } from 'vitest';
import { pairedMeans, splitPaired } from './paired';

describe('paired sets', () => {
  it('splits outcomes over the instances both configurations ran', () => {
    const baseline = new Map([
      ['a', true],
      ['b', true],
      ['c', false],
      ['d', false],
      ['only-base', true],
    ]);
    const other = new Map([
      ['d', true],
      ['c', false],
      ['b', false],
      ['a', true],
      ['only-other', true],
    ]);
    expect(splitPaired(baseline, other)).toEqual({
      common: ['a', 'b', 'c', 'd'],
      both: ['a'],
      firstOnly: ['b'],
      secondOnly: ['d'],
      neither: ['c'],
    });
  });

  it('compares means on the paired ids with a bootstrap interval of the difference', () => {
    const first = new Map([
      ['a', 20],
      ['b', 10],
      ['c', 30],
    ]);
    const second = new Map([
      ['a', 16],
      ['b', 8],
      ['c', 24],
    ]);
    const paired = pairedMeans(['a', 'b', 'c'], first, second, { seed: 7 });
    expect(paired).toMatchObject({ n: 3, first: 20, second: 16 });
    expect(paired.relativeChange).toBeCloseTo(-0.2, 12);
    // Differences are −4, −2, −6: every resample's mean lies in [−6, −2].
    expect(paired.differenceInterval!.low).toBeGreaterThanOrEqual(-6);
    expect(paired.differenceInterval!.high).toBeLessThanOrEqual(-2);
    expect(paired.differenceInterval!.estimate).toBe(-4);
    expect(pairedMeans(['a', 'b', 'c'], first, second, { seed: 7 })).toEqual(paired);
    expect(pairedMeans([], first, second)).toEqual({ n: 0, first: null, second: null, relativeChange: null, differenceInterval: null });
    expect(() => pairedMeans(['a', 'zzz'], first, second)).toThrow(/"zzz" has no value under the first configuration/);
  });
});
