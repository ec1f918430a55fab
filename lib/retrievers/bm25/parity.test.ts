import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT, runBm25ReferenceBatch, type ReferenceResult, type ReferenceSpec } from '../../../test/python/run-bm25-reference';
import { buildOkapiIndex, okapiScores } from './okapi';
import { PATH_INDEX_WEIGHT } from './params';
import { rankAll } from './ranking';
import { BlobTermStore } from './blob-terms';
import { bm25ScoresForTokens, buildBm25Index, buildBm25IndexOf } from './retriever';
import { tokenize } from './tokenizer';

/**
 * Parity with the real rank_bm25 (test/python/bm25_reference.py in the project venv) on real text:
 * SWE-bench Verified gold patches as documents, their first changed file as the path, problem statements
 * as queries. Python tokenizes with its own App. E tokenizer, so the tokenizer is checked too.
 */

interface Instance {
  instance_id: string;
  problem_statement: string;
  patch: string;
}

const rows: Instance[] = readFileSync(path.resolve(REPO_ROOT, '../shared/data/swebench_verified.jsonl'), 'utf8')
  .split('\n')
  .filter((line) => line.trim() !== '')
  .map((line) => JSON.parse(line) as Instance);

const docs: { path: string; content: string }[] = [];
const outside: Instance[] = [];
const seenPaths = new Set<string>();
for (const row of rows) {
  const firstFile = /^diff --git a\/(\S+)/m.exec(row.patch)![1]!;
  if (docs.length < 240 && !seenPaths.has(firstFile)) {
    seenPaths.add(firstFile);
    docs.push({ path: firstFile, content: row.patch });
  } else {
    outside.push(row);
  }
}

const queries: string[] = [
  ...outside.slice(0, 40).map((r) => r.problem_statement),
  ...rows.slice(0, 8).map((r) => r.problem_statement),
  'zzqx_absent_term qqq_nothing_here',
  'diff --git index a/ b/ @@ def return self',
  `Traceback in ${docs[3]!.path} and also ${docs[10]!.path}, see ${docs[3]!.path}`,
  '',
  'foo\u0085bar Django\u00a0Model\ufeffField \u001cquery\u2028set HTTPS://example.com (https://x.org) naïve_name',
  'queryset queryset queryset filter filter',
  `${'Ab-'.repeat(3000)} ${'x.Y/'.repeat(2000)}`,
];

const close = (a: number, b: number): boolean => Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b));

const smallCorpora: { name: string; docs: string[][]; queries: string[][] }[] = [
  {
    name: 'negative average idf (every term common): the floor itself is negative',
    docs: [
      ['a', 'b'],
      ['a', 'b'],
      ['a', 'c'],
    ],
    queries: [['a'], ['b'], ['c'], ['a', 'c', 'a'], ['zz']],
  },
  {
    name: 'a term in exactly half the documents has idf 0 and is not floored',
    docs: [['x', 'y'], ['x'], ['z'], ['w', 'w', 'w']],
    queries: [['x'], ['x', 'y'], ['w'], ['y', 'z', 'w']],
  },
  {
    name: 'empty documents among others',
    docs: [[], ['a', 'b', 'b'], [], ['b']],
    queries: [['a'], ['b'], ['a', 'b']],
  },
  {
    name: 'a single document',
    docs: [['a', 'a', 'b']],
    queries: [['a'], ['b', 'b'], ['c']],
  },
  {
    name: 'identical documents tie and keep insertion order',
    docs: [['k', 'v'], ['q'], ['k', 'v'], ['k', 'v'], ['r', 's']],
    queries: [['k'], ['v', 'k'], ['none']],
  },
];

const corpusSpec: ReferenceSpec = {
  mode: 'raw',
  docs: docs.map((d) => d.content),
  paths: docs.map((d) => d.path),
  path_weight: PATH_INDEX_WEIGHT,
  queries,
  emit_tokens: true,
  emit_parts: true,
};
// One Python process for every comparison: interpreter and numpy start once.
const [reference, ...smallReferences] = runBm25ReferenceBatch([
  corpusSpec,
  ...smallCorpora.map((c): ReferenceSpec => ({ mode: 'tokens', docs: c.docs, paths: null, queries: c.queries, emit_idf: true })),
]) as [ReferenceResult, ...ReferenceResult[]];

/** Indices where `ours` and `theirs` differ by more than 1e-9 (relative above 1). */
function mismatches(ours: ArrayLike<number>, theirs: readonly number[]): number[] {
  const bad: number[] = [];
  if (ours.length !== theirs.length) return [-1];
  for (let i = 0; i < ours.length; i++) if (!close(ours[i]!, theirs[i]!)) bad.push(i);
  return bad;
}

describe('BM25 parity with rank_bm25 (CodeGrep App. E)', () => {
  const index = buildBm25Index(docs);
  const queryTokens = queries.map(tokenize);

  it('runs on a corpus that exercises every IDF case', () => {
    expect(docs.length).toBeGreaterThanOrEqual(200);
    const n = index.content.documentCount;
    const df = (t: string): number => {
      const id = index.content.vocabulary.get(t);
      return id === undefined ? 0 : index.content.termOffsets[id + 1]! - index.content.termOffsets[id]!;
    };
    const allQueryTerms = new Set(queryTokens.flat());
    expect([...allQueryTerms].some((t) => df(t) > n / 2)).toBe(true); // negative idf → epsilon floor
    expect([...allQueryTerms].some((t) => df(t) === 0)).toBe(true); // absent terms
    expect(queryTokens.some((q) => q.length > 0 && q.every((t) => df(t) === 0))).toBe(true);
    expect(reference.path_scores!.some((s) => s.some((x) => x !== 0))).toBe(true); // the path index fires
  });

  it('tokenizes documents, paths and queries exactly as the Python App. E tokenizer', () => {
    expect(docs.map((d) => tokenize(d.content))).toEqual(reference.tokens!.docs);
    expect(docs.map((d) => tokenize(d.path))).toEqual(reference.tokens!.paths);
    expect(queryTokens).toEqual(reference.tokens!.queries);
  });

  it('computes the same average IDF (the floor base)', () => {
    expect(close(index.content.averageIdf, reference.average_idf)).toBe(true);
    expect(close(index.path.averageIdf, reference.path_average_idf!)).toBe(true);
  });

  it('content and path scores agree with get_scores to 1e-9', () => {
    let worst = 0;
    queryTokens.forEach((tokens, q) => {
      const content = okapiScores(index.content, tokens);
      const paths = okapiScores(index.path, tokens);
      content.forEach((s, d) => (worst = Math.max(worst, Math.abs(s - reference.content_scores![q]![d]!))));
      expect({ query: q, content: mismatches(content, reference.content_scores![q]!) }).toEqual({ query: q, content: [] });
      expect({ query: q, path: mismatches(paths, reference.path_scores![q]!) }).toEqual({ query: q, path: [] });
    });
    expect(worst).toBeLessThanOrEqual(1e-9);
  });

  it('combined scores are content + 2 × path, like rank_bm25 content + 2 × path, and rankings are identical', () => {
    queryTokens.forEach((tokens, q) => {
      const combined = bm25ScoresForTokens(index, tokens);
      const content = okapiScores(index.content, tokens);
      const paths = okapiScores(index.path, tokens);
      const notSum = Array.from(combined).flatMap((s, d) => (s === content[d]! + 2 * paths[d]! ? [] : [d]));
      expect({ query: q, notSum }).toEqual({ query: q, notSum: [] });
      expect({ query: q, combined: mismatches(combined, reference.scores![q]!) }).toEqual({ query: q, combined: [] });
      expect({ query: q, ranking: Array.from(rankAll(combined)) }).toEqual({ query: q, ranking: reference.rankings[q] });
    });
  });

  it('an index built from blob-keyed term counts (blob-terms.ts, commit-index.ts) scores and ranks exactly as rank_bm25', async () => {
    // The store's vocabulary is shared across commits: tokenize the documents in reverse first, so its term ids
    // differ from the commit's and the per-commit re-numbering is exercised.
    const store = await BlobTermStore.open(null);
    const blobOf = (d: number): string => d.toString(16).padStart(40, '0');
    for (let d = docs.length - 1; d >= 0; d--) store.add(blobOf(d), Buffer.from(docs[d]!.content, 'utf8'));
    const fromCounts = buildBm25IndexOf(
      docs.map((doc, d) => ({ path: doc.path, blob: blobOf(d) })),
      (doc) => doc.path,
      (content, doc) => content.addTermCounts(store.vocabulary, store.get(doc.blob)!.termIds, store.get(doc.blob)!.counts),
    );
    expect(fromCounts.content.averageIdf).toBe(index.content.averageIdf);
    queryTokens.forEach((tokens, q) => {
      const combined = bm25ScoresForTokens(fromCounts, tokens);
      expect({ query: q, identical: Buffer.from(combined.buffer).equals(Buffer.from(bm25ScoresForTokens(index, tokens).buffer)) }).toEqual({
        query: q,
        identical: true,
      });
      expect({ query: q, combined: mismatches(combined, reference.scores![q]!) }).toEqual({ query: q, combined: [] });
      expect({ query: q, ranking: Array.from(rankAll(combined)) }).toEqual({ query: q, ranking: reference.rankings[q] });
    });
  });

  it('the path weight changes rankings only for queries that quote a path', () => {
    const pathQuery = queryTokens[queries.findIndex((q) => q.startsWith('Traceback in'))]!;
    const withPath = bm25ScoresForTokens(index, pathQuery);
    const contentOnly = bm25ScoresForTokens({ ...index, pathWeight: 0 }, pathQuery);
    const quoted = [3, 10];
    for (const d of quoted) expect(withPath[d]! - contentOnly[d]!).toBeGreaterThan(0);
    expect(
      Array.from(rankAll(withPath))
        .slice(0, 2)
        .sort((a, b) => a - b),
    ).toEqual(quoted);
  });
});

describe('BM25 Okapi parity on degenerate corpora (tokens given)', () => {
  it.each(smallCorpora.map((c, i) => [c.name, i] as const))('%s', (_name, i) => {
    const c = smallCorpora[i]!;
    const ref = smallReferences[i]!;
    const index = buildOkapiIndex(c.docs);
    expect(close(index.averageIdf, ref.average_idf)).toBe(true);
    for (const [term, idf] of Object.entries(ref.idf!)) expect(close(index.idf[index.vocabulary.get(term)!]!, idf)).toBe(true);
    c.queries.forEach((q, qi) => {
      const scores = okapiScores(index, q);
      expect(mismatches(scores, ref.scores![qi]!)).toEqual([]);
      expect(Array.from(rankAll(scores))).toEqual(ref.rankings[qi]);
    });
  });

  it('the named edge cases really occur', () => {
    expect(smallReferences[0]!.average_idf).toBeLessThan(0);
    expect(smallReferences[1]!.idf!['x']).toBe(0);
    expect(buildOkapiIndex(smallCorpora[1]!.docs).idf[0]).toBe(0);
  });

  it('accepts corpora rank_bm25 cannot index (no documents, no tokens): every score is 0', () => {
    expect(okapiScores(buildOkapiIndex([]), ['a'])).toEqual(new Float64Array(0));
    expect(Array.from(okapiScores(buildOkapiIndex([[], []]), ['a']))).toEqual([0, 0]);
  });
});
