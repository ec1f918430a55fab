import { describe, expect, it } from 'vitest';
import { readRows } from '../artifacts/read-rows';
import { MIN_LABEL_WEIGHT } from '../trajectories/catm-parameters';
import { mineTrajectories } from '../trajectories/mine-trajectories';
import path from 'node:path';
import {
  computeWeights,
  isRetainedWeight,
  labelWeight,
  labelWeightModel,
  ReasoningLengthStats,
  unnormalizedWeight,
  weighCandidate,
} from './weights';

const SAMPLE = path.resolve(__dirname, '../../../shared/data/openhands_trajectories.sample.jsonl');

/** Hand-computed with w̃ = 1 − 2^(−l/β): 2^(−1/2) = 0.70710678, 2^(−3/2) = 0.35355339, 2^(−2) = 0.25. */
function expectClose(actual: readonly number[], expected: readonly number[]): void {
  expect(actual).toHaveLength(expected.length);
  actual.forEach((value, i) => expect(value).toBeCloseTo(expected[i]!, 7));
}

describe('CATM weights (CodeGrep §3.4, Eq. 1–2)', () => {
  it('a single candidate sits at the median: w̃ = 0.5, µraw = 0.5, w = 1', () => {
    const r = computeWeights([50]);
    expect(r).toEqual({ beta: 50, muRaw: 0.5, unnormalized: [0.5], weights: [1], retained: [true] });
  });

  it('ties: equal lengths all get w̃ = 0.5 and w = 1', () => {
    const r = computeWeights([10, 10, 10]);
    expect(r.beta).toBe(10);
    expect(r.muRaw).toBe(0.5);
    expect(r.weights).toEqual([1, 1, 1]);
  });

  it('β is the median; an even count takes the mean of the two middle values', () => {
    const r = computeWeights([40, 10, 20, 20]);
    expect(r.beta).toBe(20);
    expectClose(r.unnormalized, [0.75, 0.29289322, 0.5, 0.5]);
    expect(r.muRaw).toBeCloseTo(2.04289322 / 4, 8);
    expectClose(r.weights, [1.46850554, 0.57348708, 0.97900369, 0.97900369]);

    const two = computeWeights([10, 30]);
    expect(two.beta).toBe(20);
    expectClose(two.unnormalized, [0.29289322, 0.64644661]);
    expectClose(two.weights, [0.62361503, 1.37638497]);
  });

  it('normalisation makes the mean weight exactly 1 (E[w] = 1)', () => {
    const r = computeWeights([31, 47, 47, 52, 88, 120, 301, 33]);
    expect(r.weights.reduce((a, b) => a + b, 0) / r.weights.length).toBeCloseTo(1, 12);
  });

  it('drops weights below 0.15 and keeps exactly 0.15', () => {
    const r = computeWeights([1, 100, 100]);
    expect(r.beta).toBe(100);
    expectClose(r.unnormalized, [0.0069075, 0.5, 0.5]);
    expectClose(r.weights, [0.02058035, 1.48970982, 1.48970982]);
    expect(r.retained).toEqual([false, true, true]);
    expect(MIN_LABEL_WEIGHT).toBe(0.15);
    expect(isRetainedWeight(0.15)).toBe(true);
    expect(isRetainedWeight(0.1499999999)).toBe(false);
  });

  it('zero-length reasoning gets w̃ = 0 and is dropped', () => {
    const r = computeWeights([0, 40, 40]);
    expect(r.beta).toBe(40);
    expect(r.unnormalized).toEqual([0, 0.5, 0.5]);
    expectClose(r.weights, [0, 1.5, 1.5]);
    expect(r.retained).toEqual([false, true, true]);
  });

  it('β = 0: w̃ is its limit (0 for l = 0, 1 for l > 0); all zero-length gives µraw = 0 and drops all, no NaN', () => {
    const mixed = computeWeights([0, 0, 5]);
    expect(mixed).toMatchObject({ beta: 0, unnormalized: [0, 0, 1], weights: [0, 0, 3], retained: [false, false, true] });
    expect(mixed.muRaw).toBeCloseTo(1 / 3, 12);

    const allZero = computeWeights([0, 0, 0]);
    expect(allZero).toEqual({ beta: 0, muRaw: 0, unnormalized: [0, 0, 0], weights: [0, 0, 0], retained: [false, false, false] });
  });

  it('no candidates: no model, no weights', async () => {
    expect(computeWeights([])).toEqual({ beta: null, muRaw: null, unnormalized: [], weights: [], retained: [] });
    expect(await labelWeightModel([])).toBeNull();
  });

  it('refuses a length that is not a token count', () => {
    expect(() => computeWeights([3, -1])).toThrow(/non-negative integer.*-1/);
    expect(() => computeWeights([2.5])).toThrow(/2\.5/);
    expect(() => unnormalizedWeight(Number.NaN, 10)).toThrow(/NaN/);
  });

  it('the streaming passes (histogram → β, µraw; then w per candidate) equal the in-memory computation', async () => {
    const lengths = [88, 31, 47, 47, 52, 30, 120, 301, 33, 47];
    async function* stream() {
      yield* lengths;
    }
    const model = await labelWeightModel(stream());
    const direct = computeWeights(lengths);
    expect(model).toEqual({ beta: direct.beta, muRaw: expect.closeTo(direct.muRaw!, 12), candidates: 10 });
    expect(model!.beta).toBe(47);
    lengths.forEach((l, i) => expect(labelWeight(l, model!)).toBeCloseTo(direct.weights[i]!, 12));

    const stats = new ReasoningLengthStats();
    [5, 1, 3].forEach((l) => stats.add(l));
    expect(stats.median()).toBe(3);
    stats.add(100);
    expect(stats.median()).toBe(4);
    expect(stats.candidates).toBe(4);
  });

  it('weighCandidate turns a kept candidate into its label row and refuses an explicit NOT_RELEVANT', () => {
    const model = { beta: 20, muRaw: 2.04289322 / 4, candidates: 4 };
    const candidate = { instanceId: 'i', trajectoryId: 't', repo: 'o/r', path: 'a.py', postReasoningTokens: 10 };
    const label = weighCandidate(candidate, 'DEFAULTED', model);
    expect(label).toMatchObject({ ...candidate, verdict: 'DEFAULTED', retained: true });
    expect(label.unnormalizedWeight).toBeCloseTo(0.29289322, 7);
    expect(label.weight).toBeCloseTo(0.57348708, 7);
    expect(weighCandidate({ ...candidate, postReasoningTokens: 0 }, 'RELEVANT', model)).toMatchObject({ weight: 0, retained: false });
    expect(() => weighCandidate(candidate, 'NOT_RELEVANT', model)).toThrow(/judged NOT_RELEVANT/);
  });

  it('on the real sample: β and the retained share of the 74 mined candidates that pass the 30-token filter', async () => {
    const run = mineTrajectories(readRows(SAMPLE));
    const lengths: number[] = [];
    for await (const c of run.candidates) lengths.push(c.postReasoningTokens);
    const r = computeWeights(lengths);
    const sorted = [...lengths].sort((a, b) => a - b);
    expect(lengths).toHaveLength(74);
    expect(r.beta).toBe((sorted[36]! + sorted[37]!) / 2);
    expect(r.weights.reduce((a, b) => a + b, 0) / 74).toBeCloseTo(1, 12);
    // Every length is ≥ 30, so w̃ ≥ 1 − 2^(−30/β); the 0.15 threshold removes nothing here.
    expect(r.retained.every(Boolean)).toBe(true);
    expect(Math.min(...r.weights)).toBeGreaterThan(MIN_LABEL_WEIGHT);
  });
});
