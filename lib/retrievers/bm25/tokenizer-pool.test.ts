import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../../test/python/run-bm25-reference';
import { BlobReader } from '../../worktrees/cat-file';
import { git } from '../../worktrees/git';
import { bareMirror, commitFiles } from '../../worktrees/synthetic-repo';
import { BlobCounter } from './blob-counter';
import { BlobTermStore } from './blob-terms';
import { indexCommit, POOL_MIN_BLOBS, type CommitIndex } from './commit-index';
import { retrieveTopK } from './retriever';
import { TermTable } from './term-table';
import { defaultTokenizerThreads, TokenizerPool } from './tokenizer-pool';

/**
 * Tokenizing in threads changes nothing but the time: the same segment bytes on disk, the same vocabulary, the
 * same index and rankings as tokenizing in the caller's thread, over a repository of real Python (the trainer's
 * own files) and SWE-bench patch text, with the awkward cases (non-ASCII, a NUL, an empty file, one blob at two
 * paths).
 */

const rows = readFileSync(path.resolve(REPO_ROOT, '../shared/data/swebench_verified.jsonl'), 'utf8')
  .split('\n')
  .filter((l) => l.trim() !== '')
  .slice(0, 40)
  .map((l) => JSON.parse(l) as { patch: string; problem_statement: string });

let root: string;
let bare: string;
let commit: string;
/** A commit of more than POOL_MIN_BLOBS new blobs: what a real repository's first commit brings. */
let many: string;
let pool: TokenizerPool;

beforeAll(async () => {
  root = mkdtempSync(path.join(tmpdir(), 'bm25-pool-'));
  const work = path.join(root, 'work');
  await git(['init', '--quiet', '--initial-branch=main', work], { timeoutMs: 60_000 });
  const files: Record<string, string> = {};
  const trainer = path.join(REPO_ROOT, 'trainer');
  for (const name of readdirSync(trainer).filter((n) => n.endsWith('.py')))
    files[`trainer/${name}`] = readFileSync(path.join(trainer, name), 'utf8');
  rows.forEach((row, i) => (files[`pkg/patch${String(i).padStart(2, '0')}.py`] = row.patch));
  files['pkg/naïve_ünïcode.py'] = 'café = "ÉTÉ"\u00a0naïve\u2003x.y/z HTTP://a.b (https://c) ok_1\n';
  files['pkg/blob.py'] = `MAGIC\u0000\u0001${rows[0]!.patch}`;
  files['pkg/empty.py'] = '';
  files['pkg/same_a.py'] = rows[1]!.patch;
  files['pkg/same_b.py'] = rows[1]!.patch;
  commit = await commitFiles(work, files, 'real text');
  const more: Record<string, string> = {};
  for (let i = 0; i < POOL_MIN_BLOBS + 20; i++) more[`many/m${i}.py`] = `${rows[i % rows.length]!.patch}\n# variant ${i} Variant_${i}.x\n`;
  many = await commitFiles(work, more, 'many files');
  bare = await bareMirror(work, path.join(root, 'bare.git'));
  pool = new TokenizerPool(2);
}, 120_000);

afterAll(async () => {
  await pool?.close();
  rmSync(root, { recursive: true, force: true });
});

function segmentBytes(dir: string): Buffer[] {
  return readdirSync(dir)
    .filter((n) => n.endsWith('.parquet'))
    .sort()
    .map((n) => readFileSync(path.join(dir, n)));
}

async function build(
  dir: string,
  tokenizers: TokenizerPool | null | undefined,
  at = commit,
): Promise<{ store: BlobTermStore; index: CommitIndex }> {
  const store = await BlobTermStore.open(dir);
  const reader = new BlobReader(bare);
  try {
    // A small window, so reading runs well ahead of and behind the counting.
    return { store, index: await indexCommit(store, reader, at, tokenizers === undefined ? { window: 3 } : { tokenizers, window: 3 }) };
  } finally {
    await reader.close();
  }
}

describe('TokenizerPool: BM25 term counts from threads', () => {
  it('counts a blob exactly as the caller-thread counter does', async () => {
    const inline = new BlobCounter(new TermTable());
    const texts = [...rows.map((r) => r.patch), 'a\u0000b', '', 'Über straße ÄÖ x_y.z/w HTTP://no'].map((t) => Buffer.from(t, 'utf8'));
    const answers = await Promise.all(texts.map((t) => pool.count(t)));
    texts.forEach((t, i) => expect(answers[i]).toEqual(inline.countAsText(t)));
    expect(answers.at(-3)!.binary).toBe(true);
  });

  it('gives byte-identical blob-term segments, the same index and the same rankings as the single-threaded path', async () => {
    const single = await build(path.join(root, 'single'), null);
    const threaded = await build(path.join(root, 'threaded'), pool);
    expect(threaded.index.stats.tokenized).toBe(single.index.stats.tokenized);
    expect(threaded.index.stats.tokenized).toBeGreaterThan(40);
    expect(threaded.index.skipped).toEqual(single.index.skipped);
    expect(single.index.skipped).toContainEqual({ path: 'pkg/blob.py', reason: 'binary' });

    const a = segmentBytes(path.join(root, 'single'));
    const b = segmentBytes(path.join(root, 'threaded'));
    expect(a).toHaveLength(1);
    expect(b).toHaveLength(1);
    expect(b[0]!.equals(a[0]!)).toBe(true);

    // The same vocabulary, id for id, so every count of every blob is the same.
    expect(threaded.store.vocabulary.size).toBe(single.store.vocabulary.size);
    for (let t = 0; t < single.store.vocabulary.size; t++)
      if (threaded.store.vocabulary.term(t) !== single.store.vocabulary.term(t))
        expect(threaded.store.vocabulary.term(t)).toBe(single.store.vocabulary.term(t));
    expect(threaded.index.paths).toEqual(single.index.paths);
    expect(Buffer.from(threaded.index.content.idf.buffer).equals(Buffer.from(single.index.content.idf.buffer))).toBe(true);
    for (const row of rows) {
      const ranked = retrieveTopK(single.index, row.problem_statement, 10);
      expect(ranked.length).toBeGreaterThan(0);
      expect(retrieveTopK(threaded.index, row.problem_statement, 10)).toEqual(ranked);
    }

    // Read back, the threaded segment gives the single-threaded counts.
    const reopened = await BlobTermStore.open(path.join(root, 'threaded'));
    const again = await build(path.join(root, 'threaded'), pool);
    expect(reopened.stats.blobsLoaded).toBe(single.index.stats.tokenized);
    expect(again.index.stats.tokenized).toBe(0);
    for (const row of rows.slice(0, 10))
      expect(retrieveTopK(again.index, row.problem_statement, 10)).toEqual(retrieveTopK(single.index, row.problem_statement, 10));
  });

  it("indexCommit's default, what the evaluation's BM25 retriever calls, uses one thread per core for many new blobs", async () => {
    const byDefault = await build(path.join(root, 'default'), undefined, many);
    const single = await build(path.join(root, 'default-single'), null, many);
    expect(byDefault.index.stats.tokenized).toBeGreaterThanOrEqual(POOL_MIN_BLOBS);
    expect(byDefault.index.stats.tokenizerThreads).toBe(defaultTokenizerThreads() >= 2 ? defaultTokenizerThreads() : 0);
    expect(single.index.stats.tokenizerThreads).toBe(0);
    expect(segmentBytes(path.join(root, 'default'))[0]!.equals(segmentBytes(path.join(root, 'default-single'))[0]!)).toBe(true);
    for (const row of rows.slice(0, 10))
      expect(retrieveTopK(byDefault.index, row.problem_statement, 10)).toEqual(retrieveTopK(single.index, row.problem_statement, 10));
    // A commit with few new blobs stays in the caller's thread (starting threads costs more than it saves).
    expect((await build(path.join(root, 'default'), undefined, commit)).index.stats.tokenizerThreads).toBe(0);
  });

  it('fails a request when closed, with a clear error', async () => {
    const closing = new TokenizerPool(1);
    const inFlight = expect(closing.count(Buffer.from(rows[0]!.patch))).rejects.toThrow(/TokenizerPool: closed/);
    await closing.close();
    await inFlight; // never left pending
    const closed = closing;
    await expect(closed.count(Buffer.from('x'))).rejects.toThrow(/TokenizerPool: closed/);
    expect(() => new TokenizerPool(0)).toThrow(/size must be a positive integer, got 0/);
  });
});
