import { describe, expect, it } from 'vitest';
import { DEFAULT_TOP_K, PATH_INDEX_WEIGHT } from './params';
import { rankAll, topKIndices } from './ranking';
import { bm25Scores, buildBm25Index, retrieveTopK } from './retriever';

const files = [
  { path: 'pkg/alpha.py', content: 'def shared(): return 1\n' },
  { path: 'pkg/beta.py', content: 'class Widget: pass  # widget factory\n' },
  { path: 'pkg/gamma.py', content: 'def shared(): return 1\n' },
  { path: 'pkg/delta.py', content: 'import os\nos.path.join\n' },
  { path: 'pkg/epsilon.py', content: 'def shared(): return 1\n' },
];

describe('BM25 retriever (App. E "Retrieval")', () => {
  it('defaults: K = 2, path weight 2', () => {
    expect(DEFAULT_TOP_K).toBe(2);
    expect(PATH_INDEX_WEIGHT).toBe(2);
    expect(buildBm25Index(files).pathWeight).toBe(2);
  });

  it('breaks ties by insertion order', () => {
    const index = buildBm25Index(files);
    const scores = bm25Scores(index, 'shared');
    expect(scores[0]).toBe(scores[2]);
    expect(scores[2]).toBe(scores[4]);
    expect(retrieveTopK(index, 'shared', 3).map((r) => r.path)).toEqual(['pkg/alpha.py', 'pkg/gamma.py', 'pkg/epsilon.py']);
    const reversed = buildBm25Index([...files].reverse());
    expect(retrieveTopK(reversed, 'shared', 3).map((r) => r.path)).toEqual(['pkg/epsilon.py', 'pkg/gamma.py', 'pkg/alpha.py']);
  });

  it('ranks by score first', () => {
    const index = buildBm25Index(files);
    const top = retrieveTopK(index, 'Widget factory widget');
    expect(top[0]).toMatchObject({ path: 'pkg/beta.py', rank: 1, matched: true });
    expect(top[0]!.score).toBeGreaterThan(0);
  });

  it('falls back to the next files when fewer than K score non-zero, marking them unmatched', () => {
    const index = buildBm25Index(files);
    const top = retrieveTopK(index, 'widget');
    expect(top.map((r) => [r.path, r.matched])).toEqual([
      ['pkg/beta.py', true],
      ['pkg/alpha.py', false],
    ]);
    expect(top[1]!.score).toBe(0);
    expect(retrieveTopK(index, 'nothing matches this', 2).map((r) => r.path)).toEqual(['pkg/alpha.py', 'pkg/beta.py']);
    expect(retrieveTopK(index, '', 2).every((r) => !r.matched)).toBe(true);
  });

  it('returns all N files when K > N, and nothing for an empty index', () => {
    expect(retrieveTopK(buildBm25Index(files), 'shared', 50)).toHaveLength(5);
    expect(retrieveTopK(buildBm25Index([]), 'shared')).toEqual([]);
  });

  it('adds the path index with weight 2 when the query quotes a path; weight 0 is App. E variant A', () => {
    const index = buildBm25Index(files);
    const contentOnly = { ...index, pathWeight: 0 };
    const query = 'error in pkg/delta.py';
    const combined = bm25Scores(index, query);
    const content = bm25Scores(contentOnly, query);
    expect(combined[3]! - content[3]!).toBeGreaterThan(0);
    expect(combined[0]).toBe(content[0]);
    expect(retrieveTopK(index, query, 1)[0]!.path).toBe('pkg/delta.py');
  });

  it('normalises paths and rejects duplicates and empty paths', () => {
    expect(buildBm25Index([{ path: './a\\b.py', content: '' }]).paths).toEqual(['a/b.py']);
    expect(() =>
      buildBm25Index([
        { path: 'a.py', content: '' },
        { path: './a.py', content: '' },
      ]),
    ).toThrow(/"a.py" appears twice/);
    expect(() => buildBm25Index([{ path: '.', content: '' }])).toThrow(/empty path/);
    expect(() => buildBm25Index(files, { pathWeight: -1 })).toThrow(/pathWeight/);
  });
});

describe('ranking helpers', () => {
  const scores = Float64Array.from([0.5, 2, -1, 2, 0, 0.5]);
  it('top-k and full rankings order by score, then by id', () => {
    expect(topKIndices(scores, 3)).toEqual([1, 3, 0]);
    expect(topKIndices(scores, 1)).toEqual([1]);
    expect(Array.from(rankAll(scores))).toEqual([1, 3, 0, 5, 4, 2]);
    for (let k = 1; k <= 7; k++) expect(topKIndices(scores, k)).toEqual(Array.from(rankAll(scores)).slice(0, k));
    expect(() => topKIndices(scores, 0)).toThrow(/k must be/);
  });
});
