import { describe, expect, it } from 'vitest';
import { fileScores } from './levels';
import { F_BETA } from './params';
import { fBetaFromPrecisionRecall, scoresFromCounts, setScores } from './set-scores';

describe('set Fβ (CodeGrep App. B)', () => {
  it('uses β = 0.5 by default', () => {
    expect(F_BETA).toBe(0.5);
    expect(setScores(['a'], ['a']).beta).toBe(0.5);
  });

  it('is 1 when both sets are empty', () => {
    expect(setScores([], [])).toEqual({ tp: 0, fp: 0, fn: 0, precision: 1, recall: 1, f: 1, beta: 0.5 });
  });

  it('is 0 when exactly one set is empty', () => {
    expect(setScores([], ['a.py'])).toEqual({ tp: 0, fp: 0, fn: 1, precision: 0, recall: 0, f: 0, beta: 0.5 });
    expect(setScores(['a.py'], [])).toEqual({ tp: 0, fp: 1, fn: 0, precision: 0, recall: 0, f: 0, beta: 0.5 });
  });

  it('matches the general formula (1+β²)PR/(β²P+R) on a hand-computed case', () => {
    // P = 1/2, R = 1/3: Fβ=0.5 = 1.25·(1/6) / (1/8 + 1/3) = (5/24)/(11/24) = 5/11; F1 = (2/6)/(5/6) = 2/5.
    const s = setScores(['a', 'b'], ['a', 'c', 'd']);
    expect(s).toMatchObject({ tp: 1, fp: 1, fn: 2, precision: 0.5 });
    expect(s.recall).toBeCloseTo(1 / 3, 15);
    expect(s.f).toBeCloseTo(5 / 11, 15);
    expect(setScores(['a', 'b'], ['a', 'c', 'd'], 1).f).toBeCloseTo(2 / 5, 15);
  });

  it('is precision-biased: a false positive costs more than a miss', () => {
    const precise = setScores(['a'], ['a', 'b']); // P = 1, R = 1/2
    const greedy = setScores(['a', 'b'], ['a']); // P = 1/2, R = 1
    expect(precise.f).toBeCloseTo(5 / 6, 15); // 1.25·0.5 / (0.25 + 0.5)
    expect(greedy.f).toBeCloseTo(5 / 9, 15); // 1.25·0.5 / (0.125 + 1)
  });

  it('is 0 for disjoint non-empty sets, and counts repeats once', () => {
    expect(setScores(['x'], ['y']).f).toBe(0);
    expect(setScores(['a', 'a', 'b'], ['a'])).toMatchObject({ tp: 1, fp: 1, fn: 0, precision: 0.5, recall: 1 });
  });

  it('rejects bad β and inconsistent counts', () => {
    expect(() => setScores(['a'], ['a'], 0)).toThrow(/beta/);
    expect(() => scoresFromCounts(3, 2, 5)).toThrow(/inconsistent counts/);
    expect(fBetaFromPrecisionRecall(0, 0, 0.5)).toBe(0);
  });

  it('file scores normalise paths on both sides first (App. E "Scoring")', () => {
    const s = fileScores(['./django\\db\\models.py', 'django/db//fields.py/'], ['django/db/models.py', 'django/db/fields.py']);
    expect(s).toMatchObject({ tp: 2, fp: 0, fn: 0, f: 1 });
  });
});
