import { describe, expect, it } from 'vitest';
import { accuracyAtK, returnAtK, topK } from './ranked';

describe('ranked-list metrics', () => {
  const ranked = ['a.py', 'b.py', 'c.py', 'd.py', 'e.py'];

  it('Acc@k is 1 only when every gold item is in the top k', () => {
    expect(accuracyAtK(ranked, ['a.py', 'c.py'], 2)).toEqual({ k: 2, accuracy: 0, found: 1, goldSize: 2 });
    expect(accuracyAtK(ranked, ['a.py', 'c.py'], 3)).toEqual({ k: 3, accuracy: 1, found: 2, goldSize: 2 });
    expect(accuracyAtK(ranked, ['z.py'], 10)).toMatchObject({ accuracy: 0, found: 0 });
    expect(accuracyAtK(ranked, [], 1)).toMatchObject({ accuracy: 1, goldSize: 0 });
  });

  it('Return@K scores the first K entries as a set', () => {
    const s = returnAtK(ranked, ['a.py', 'e.py'], 1, 1);
    expect(s).toMatchObject({ tp: 1, fp: 0, fn: 1, precision: 1, recall: 0.5 });
    expect(s.f).toBeCloseTo(2 / 3, 15);
    expect(returnAtK(ranked, ['a.py', 'e.py'], 5, 1)).toMatchObject({ tp: 2, precision: 0.4, recall: 1 });
  });

  it('rejects a non-positive k', () => {
    expect(() => topK(ranked, 0)).toThrow(/k must be a positive integer/);
    expect(topK(ranked, 99)).toEqual(ranked);
  });
});
