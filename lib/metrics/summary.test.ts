import { describe, expect, it } from 'vitest';
import { bootstrapCI, median, quantile, summarize } from './summary';
import { seededRandom } from './seeded-random';

describe('summaries (CodeGrep §4.2, Table 2)', () => {
  it('mean, median and the share with Fβ ≥ 0.8', () => {
    expect(summarize([0, 0.5, 0.8, 1])).toEqual({ n: 4, mean: 0.575, median: 0.65, shareAtLeast: 0.5, threshold: 0.8 });
    expect(summarize([0.9, 0.1, 0.3])).toMatchObject({ median: 0.3, shareAtLeast: 1 / 3 });
    expect(summarize([])).toEqual({ n: 0, mean: null, median: null, shareAtLeast: null, threshold: 0.8 });
  });

  it('rejects non-finite values by position', () => {
    expect(() => summarize([0.1, Number.NaN])).toThrow(/value #1/);
  });

  it('median does not reorder its input', () => {
    const values = [3, 1, 2];
    expect(median(values)).toBe(2);
    expect(values).toEqual([3, 1, 2]);
  });

  it('quantile interpolates linearly between order statistics', () => {
    expect(quantile([1, 2, 3, 4], 0.5)).toBe(2.5);
    expect(quantile([1, 2, 3, 4], 0)).toBe(1);
    expect(quantile([1, 2, 3, 4], 1)).toBe(4);
    expect(quantile([10, 20], 0.25)).toBe(12.5);
  });
});

describe('bootstrap CI (percentile method, seeded)', () => {
  const random = seededRandom(7);
  const values = Array.from({ length: 200 }, () => random());

  it('is reproducible for a seed and changes with the seed', () => {
    const a = bootstrapCI(values, { seed: 1 });
    expect(bootstrapCI(values, { seed: 1 })).toEqual(a);
    expect(bootstrapCI(values, { seed: 2 })).not.toEqual(a);
    expect(a).toMatchObject({ resamples: 1000, confidence: 0.95, seed: 1 });
  });

  it('brackets the mean, with a width near the normal approximation 2·1.96·sd/√n', () => {
    const ci = bootstrapCI(values, { seed: 3, resamples: 2000 });
    const mean = values.reduce((s, v) => s + v, 0) / values.length;
    const sd = Math.sqrt(values.reduce((s, v) => s + (v - mean) ** 2, 0) / (values.length - 1));
    expect(ci.estimate).toBeCloseTo(mean, 12);
    expect(ci.low).toBeLessThan(mean);
    expect(ci.high).toBeGreaterThan(mean);
    const expectedWidth = (2 * 1.96 * sd) / Math.sqrt(values.length);
    expect((ci.high - ci.low) / expectedWidth).toBeGreaterThan(0.85);
    expect((ci.high - ci.low) / expectedWidth).toBeLessThan(1.15);
  });

  it('collapses on constant data and takes another statistic', () => {
    expect(bootstrapCI([0.25, 0.25, 0.25], { resamples: 50 })).toMatchObject({ estimate: 0.25, low: 0.25, high: 0.25, resamples: 50 });
    const ci = bootstrapCI([0, 0, 1, 1, 1], { statistic: median, resamples: 100 });
    expect(ci.estimate).toBe(1);
    expect([0, 1]).toContain(ci.low);
  });

  it('rejects empty input and bad options', () => {
    expect(() => bootstrapCI([])).toThrow(/at least one value/);
    expect(() => bootstrapCI([1], { resamples: 0 })).toThrow(/resamples/);
    expect(() => bootstrapCI([1], { confidence: 1 })).toThrow(/confidence/);
  });
});
