import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../../test/python/run-bm25-reference';
import { BlobReader } from '../../worktrees/cat-file';
import { git } from '../../worktrees/git';
import { bareMirror, commitFiles } from '../../worktrees/synthetic-repo';
import { BlobTermStore } from './blob-terms';
import { listCommitFiles } from './commit-files';
import { indexCommit } from './commit-index';
import { retrieveTopK, type Bm25Index } from './retriever';
import { indexWorktree } from './worktree';

/**
 * The BM25 index of a commit built from the bare repository and blob-keyed term counts is the index of a
 * checkout of that commit (same documents, same skips, same IDF, same rankings), and a second commit that
 * shares most blobs with the first tokenizes only its new ones.
 */

const rows = readFileSync(path.resolve(REPO_ROOT, '../shared/data/swebench_verified.jsonl'), 'utf8')
  .split('\n')
  .filter((l) => l.trim() !== '')
  .slice(0, 60)
  .map((l) => JSON.parse(l) as { instance_id: string; patch: string; problem_statement: string });
const text = (i: number): string => rows[i]!.patch;

const T = { timeoutMs: 60_000 };
let root: string;
let work: string;
let bare: string;
let first: string;
let second: string;
/** Blobs of indexed files that the second commit adds (changed or new files). */
const changedInSecond = 4;

function firstTree(): Record<string, string> {
  const files: Record<string, string> = {};
  for (let i = 0; i < 30; i++) files[`pkg/mod${String(i).padStart(2, '0')}/core.py`] = text(i);
  files['pkg/env_utils.py'] = text(30);
  files['tests/test_core.py'] = text(31);
  files['pkg/tests/test_deep.py'] = text(32);
  files['pkg/naïve_ünïcode.py'] = text(33);
  files['Zeta.py'] = text(34); // upper case sorts before lower case in string order
  files['pkg/same_a.py'] = text(35); // two paths, one blob
  files['pkg/same_b.py'] = text(35);
  for (const skipped of ['__pycache__', 'venv', '.venv', 'env', 'build', 'dist', '.eggs']) {
    files[`${skipped}/hidden.py`] = text(36);
    files[`pkg/${skipped}/nested.py`] = text(37);
  }
  files['docs/index.rst'] = text(38);
  files['pkg/data.pyc'] = text(39);
  files['pkg/blob.py'] = `MAGIC\u0000\u0001${text(40)}`;
  files['pkg/big.py'] = 'x = 1\n'.repeat(5000);
  return files;
}

beforeAll(async () => {
  root = mkdtempSync(path.join(tmpdir(), 'bm25-commit-'));
  work = path.join(root, 'work');
  await git(['init', '--quiet', '--initial-branch=main', work], T);
  symlinkSync('pkg/env_utils.py', path.join(work, 'link.py'));
  first = await commitFiles(work, firstTree(), 'first');
  second = await commitFiles(
    work,
    {
      'pkg/mod03/core.py': text(41), // changed
      'pkg/mod07/core.py': text(42), // changed
      'pkg/new_module.py': text(43), // new
      'tests/test_new.py': text(44), // new
      'README.md': text(45), // not indexed: no new blob to tokenize
    },
    'second',
  );
  bare = await bareMirror(work, path.join(root, 'bare.git'));
}, 120_000);

afterAll(() => rmSync(root, { recursive: true, force: true }));

async function checkoutIndex(commit: string, opts: { includeTests?: boolean; maxFileBytes?: number }) {
  await git(['checkout', '--quiet', commit], { ...T, cwd: work });
  return indexWorktree(work, opts);
}

function expectSameIndex(ours: Bm25Index, theirs: Bm25Index): void {
  expect(ours.paths).toEqual(theirs.paths);
  for (const part of ['content', 'path'] as const) {
    const a = ours[part];
    const b = theirs[part];
    expect(a.documentCount).toBe(b.documentCount);
    expect(a.vocabulary.size).toBe(b.vocabulary.size);
    for (let t = 0; t < a.vocabulary.size; t++)
      if (a.vocabulary.term(t) !== b.vocabulary.term(t)) expect(a.vocabulary.term(t)).toBe(b.vocabulary.term(t));
    expect(a.averageIdf).toBe(b.averageIdf); // same summation order, to the last bit
    expect(a.averageLength).toBe(b.averageLength);
    expect(Array.from(a.documentLengths)).toEqual(Array.from(b.documentLengths));
    expect(Buffer.from(a.idf.buffer).equals(Buffer.from(b.idf.buffer))).toBe(true);
    expect(Buffer.from(a.postingWeights.buffer).equals(Buffer.from(b.postingWeights.buffer))).toBe(true);
    expect(Array.from(a.postingDocs)).toEqual(Array.from(b.postingDocs));
  }
  for (const row of rows.slice(0, 50)) {
    expect(retrieveTopK(ours, row.problem_statement, 10)).toEqual(retrieveTopK(theirs, row.problem_statement, 10));
  }
}

describe('indexCommit: BM25 of a commit from the bare repository and blob-keyed term counts', () => {
  it('is the index of a checkout of the commit: documents, skips, IDF and rankings, tests in or out', async () => {
    for (const includeTests of [true, false]) {
      const store = await BlobTermStore.open(null);
      const reader = new BlobReader(bare);
      try {
        for (const commit of [first, second]) {
          const checkout = await checkoutIndex(commit, { includeTests, maxFileBytes: 20_000 });
          const ours = await indexCommit(store, reader, commit, { includeTests, maxFileBytes: 20_000 });
          expect(ours.skipped).toEqual(checkout.skipped);
          expectSameIndex(ours, checkout);
        }
      } finally {
        await reader.close();
      }
    }
  }, 120_000);

  it('tokenizes only the new blobs of a second commit, and nothing once the segments are on disk', async () => {
    const dir = path.join(root, 'terms');
    const reader = new BlobReader(bare);
    try {
      const store = await BlobTermStore.open(dir);
      const a = await indexCommit(store, reader, first);
      // 30 modules + env_utils + 2 tests + unicode + Zeta + one blob for same_a/same_b + blob.py + big.py
      expect(a.stats.tokenized).toBe(38);
      expect(a.stats.documents).toBe(38); // blob.py is binary: tokenized (sniffed) once, not a document
      const b = await indexCommit(store, reader, second);
      expect(b.stats.tokenized).toBe(changedInSecond);
      expect(b.stats.cached).toBe(b.stats.candidates - 1 - changedInSecond); // same_a/same_b share a blob
      expect(store.stats.blobsTokenized).toBe(38 + changedInSecond);
      expectSameIndex(b, await checkoutIndex(second, {}));

      const reopened = await BlobTermStore.open(dir);
      expect(reopened.stats.segmentsRead).toBe(2);
      expect(reopened.size).toBe(38 + changedInSecond);
      for (const commit of [first, second]) {
        const again = await indexCommit(reopened, reader, commit);
        expect(again.stats.tokenized).toBe(0);
        expectSameIndex(again, commit === first ? a : b);
      }
      expect(reopened.stats.segmentsWritten).toBe(0);
    } finally {
      await reader.close();
    }
  }, 120_000);

  it("uses a listing started in advance (the next commit listed while this one is built): the same index; another commit's is refused", async () => {
    const store = await BlobTermStore.open(null);
    const reader = new BlobReader(bare);
    try {
      for (const commit of [first, second]) {
        const listing = listCommitFiles(bare, commit, {});
        const ahead = await indexCommit(store, reader, commit, { listing });
        expectSameIndex(ahead, await checkoutIndex(commit, {}));
      }
      await expect(indexCommit(store, reader, second, { listing: listCommitFiles(bare, first, {}) })).rejects.toThrow(
        `the listing given is of commit ${first}, not ${second}`,
      );
    } finally {
      await reader.close();
    }
  });

  it('names the repository when a commit is not in it', async () => {
    const store = await BlobTermStore.open(null);
    const reader = new BlobReader(bare);
    try {
      await expect(indexCommit(store, reader, 'f'.repeat(40))).rejects.toThrow(/bare\.git ls-tree .* failed .*not a tree object/);
    } finally {
      await reader.close();
    }
  });
});
