import { describe, expect, it } from 'vitest';
import { pairedSignFlipTest } from './paired-test';

describe('pairedSignFlipTest', () => {
  it('finds a consistent improvement significant', () => {
    const before = Array.from({ length: 30 }, (_, i) => (i % 3) / 10);
    const after = before.map((b, i) => b + 0.2 + (i % 2) * 0.05);
    const r = pairedSignFlipTest(before, after);
    expect(r.pValue).toBeLessThan(0.001);
    expect(r.meanDifference).toBeCloseTo(0.225, 10);
    expect(r.n).toBe(30);
  });

  it('does not call a worsening or no change significant', () => {
    const before = Array.from({ length: 30 }, (_, i) => 0.5 + (i % 5) / 20);
    expect(
      pairedSignFlipTest(
        before,
        before.map((b) => b - 0.1),
      ).pValue,
    ).toBeGreaterThan(0.99);
    // All differences 0: every resample ties the observed mean, p = 1.
    expect(pairedSignFlipTest(before, before).pValue).toBe(1);
  });

  it('gives a p-value near the exact one on a small case', () => {
    // Differences +1 ×5: only the all-plus assignment (1/32) reaches the observed sum.
    const r = pairedSignFlipTest([0, 0, 0, 0, 0], [1, 1, 1, 1, 1], { resamples: 40_000, seed: 3 });
    expect(r.pValue).toBeGreaterThan(0.025);
    expect(r.pValue).toBeLessThan(0.038);
  });

  it('is reproducible for a seed and rejects bad input', () => {
    const a = [0.1, 0.4, 0.2, 0.9];
    const b = [0.3, 0.3, 0.6, 1.0];
    expect(pairedSignFlipTest(a, b).pValue).toBe(pairedSignFlipTest(a, b).pValue);
    expect(() => pairedSignFlipTest([1], [1, 2])).toThrow(/pairs must match/);
    expect(() => pairedSignFlipTest([], [])).toThrow(/no pairs/);
    expect(() => pairedSignFlipTest([Number.NaN], [1])).toThrow(/pair 0 is not finite/);
    expect(() => pairedSignFlipTest([1], [1], { resamples: 0 })).toThrow(/resamples/);
  });
});
