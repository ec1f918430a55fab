import { describe, expect, it } from 'vitest';
import { catmOnlyFiles, goldCoverage, lineRangeScores, type LineRange } from './line-ranges';

const r = (path: string, start: number, end: number): LineRange => ({ path, start, end });

describe('line-range Fβ (CodeGrep App. B)', () => {
  const g0 = r('f.py', 10, 19); // 10 lines
  const g1 = r('f.py', 15, 24);

  it('coverage is measured against the gold range length', () => {
    expect(goldCoverage(r('f.py', 12, 22), g0)).toBe(0.8);
    expect(goldCoverage(r('f.py', 1, 1000), g0)).toBe(1);
    expect(goldCoverage(r('f.py', 20, 30), g0)).toBe(0);
  });

  it('matches at exactly 50% coverage and not below', () => {
    expect(lineRangeScores([r('f.py', 15, 30)], [g0]).tp).toBe(1); // 15..19 = 5/10
    expect(lineRangeScores([r('f.py', 16, 30)], [g0]).tp).toBe(0); // 16..19 = 4/10
  });

  it('requires the same file (after path normalisation)', () => {
    expect(lineRangeScores([r('g.py', 10, 19)], [g0]).tp).toBe(0);
    expect(lineRangeScores([r('./f.py', 10, 19)], [g0]).tp).toBe(1);
  });

  it('is greedy in prediction order, each taking the FIRST unpaired gold range it matches', () => {
    // p(15-24) covers g0 by 5/10 = 50%, so it takes g0 (first in gold order) though it equals g1;
    // p(10-14) then covers g1 by 0 lines: greedy finds 1 pair where an optimal matching would find 2.
    const s = lineRangeScores([r('f.py', 15, 24), r('f.py', 10, 14)], [g0, g1]);
    expect(s.matches).toEqual([{ predicted: 0, gold: 0 }]);
    expect(s).toMatchObject({ tp: 1, fp: 1, fn: 1, precision: 0.5, recall: 0.5 });
    // The other order pairs both.
    const t = lineRangeScores([r('f.py', 10, 14), r('f.py', 15, 24)], [g0, g1]);
    expect(t.matches).toEqual([
      { predicted: 0, gold: 0 },
      { predicted: 1, gold: 1 },
    ]);
    expect(t.f).toBe(1);
  });

  it('skips gold ranges a prediction overlaps by less than half instead of consuming them', () => {
    // 18-30 overlaps g0 by 2/10 (no match) and g1 by 18..24 = 7/10 (match).
    const s = lineRangeScores([r('f.py', 18, 30)], [g0, g1]);
    expect(s.matches).toEqual([{ predicted: 0, gold: 1 }]);
  });

  it('is one-to-one: a range covering two gold ranges matches one; a repeated prediction is scored twice', () => {
    const wide = lineRangeScores([r('f.py', 1, 1000)], [g0, g1]);
    expect(wide).toMatchObject({ tp: 1, precision: 1, recall: 0.5 });
    expect(wide.f).toBeCloseTo((1.25 * 0.5) / (0.25 + 0.5), 15);
    const repeated = lineRangeScores([g0, g0], [g0]);
    expect(repeated).toMatchObject({ tp: 1, fp: 1, precision: 0.5, recall: 1 });
  });

  it('drops predicted ranges on CATM-only files before scoring (merge mode)', () => {
    const catm = catmOnlyFiles(['f.py', 'catm.py', './catm.py'], ['f.py']);
    expect(catm).toEqual(['catm.py']);
    const s = lineRangeScores([r('catm.py', 1, 50), g0, r('outside.py', 1, 3)], [g0, g1], { catmOnlyFiles: catm });
    expect(s.droppedCatmOnly).toBe(1);
    expect(s.scored.map((x) => x.path)).toEqual(['f.py', 'outside.py']);
    // A range on a file outside G entirely stays and is a false positive.
    expect(s).toMatchObject({ tp: 1, fp: 1, fn: 1, precision: 0.5, recall: 0.5, f: 0.5 });
  });

  it('has the file score’s empty-set cases, after dropping', () => {
    expect(lineRangeScores([], []).f).toBe(1);
    expect(lineRangeScores([r('catm.py', 1, 2)], [], { catmOnlyFiles: ['catm.py'] }).f).toBe(1);
    expect(lineRangeScores([r('catm.py', 1, 2)], [g0], { catmOnlyFiles: ['catm.py'] }).f).toBe(0);
    expect(lineRangeScores([g0], []).f).toBe(0);
  });

  it('rejects malformed ranges with a message naming the range', () => {
    expect(() => lineRangeScores([r('f.py', 9, 3)], [g0])).toThrow(/predicted line range #0 .*"start":9/);
    expect(() => lineRangeScores([], [r('f.py', 0, 3)])).toThrow(/gold line range #0/);
    expect(() => lineRangeScores([r('f.py', 1.5, 3)], [g0])).toThrow(/integers/);
  });
});
