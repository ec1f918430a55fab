import { readBlobs, type BlobReader } from '../../worktrees/cat-file';
import type { BlobTermStore, CountedBlob } from './blob-terms';
import { listCommitFiles, separateBinaryFiles, type CommitFile, type CommitFiles } from './commit-files';
import { sharedTokenizerPool, type TokenizerPool } from './tokenizer-pool';
import { buildBm25IndexOf, type Bm25Index, type Bm25Options } from './retriever';
import type { SkippedFile, WorktreeScanOptions } from './worktree';

/**
 * The BM25 index of one commit (CodeGrep App. E), built from the bare repository with no checkout: the commit's
 * tree listing (commit-files.ts) gives each document's path and blob id; a blob's term counts come from the
 * store (blob-terms.ts) and only blobs it has never seen are read (`git cat-file --batch`) and tokenized. IDF,
 * document lengths and the path index are built per commit, so the index, and every ranking, is exactly the one
 * `indexWorktree` builds on a checkout of the commit.
 */

export interface CommitIndexStats {
  /** Entries of the commit's tree (every file). */
  listed: number;
  /** Candidates after the path rules, before the binary check. */
  candidates: number;
  documents: number;
  /** Candidate blobs not in the store: read and tokenized by this call. */
  tokenized: number;
  tokenizedBytes: number;
  /** Candidate blobs found in the store. */
  cached: number;
  /** Threads that tokenized the new blobs; 0: the caller's thread. */
  tokenizerThreads: number;
  ms: { list: number; read: number; build: number };
}

export interface CommitIndex extends Bm25Index {
  commit: string;
  skipped: SkippedFile[];
  stats: CommitIndexStats;
}

export interface CommitIndexOptions extends Pick<WorktreeScanOptions, 'includeTests' | 'extensions' | 'maxFileBytes'>, Bm25Options {
  signal?: AbortSignal;
  /** Blob reads in flight (default 64). */
  window?: number;
  /** Called after each blob tokenized (progress). */
  onTokenized?: (done: number, total: number) => void;
  /**
   * Threads that tokenize (tokenizer-pool.ts). Left out: the process's shared pool when there are at least
   * POOL_MIN_BLOBS blobs to tokenize and more than one core; null: the caller's thread, as with one core.
   */
  tokenizers?: TokenizerPool | null;
  /**
   * The commit's listing, started earlier (`listCommitFiles` of this commit, with these options): a caller that
   * knows its next commit lists it while this one is tokenized and built, so `git ls-tree` runs on the idle core.
   */
  listing?: Promise<CommitFiles>;
}

/** Fewer new blobs than this are tokenized in the caller's thread: starting the threads costs about a second. */
export const POOL_MIN_BLOBS = 256;

/**
 * Reads into `store` the blobs of `files` it lacks; returns how many and their bytes. With a pool the reading and
 * the counting overlap: up to `window` blobs are being counted while the next ones are read, and the answers
 * are kept in the order the blobs were read, so the store (its vocabulary ids, its segments) is the same as
 * without one.
 */
export async function tokenizeMissingBlobs(
  store: BlobTermStore,
  reader: BlobReader,
  files: readonly CommitFile[],
  opts: Pick<CommitIndexOptions, 'window' | 'onTokenized' | 'tokenizers'> = {},
): Promise<{ tokenized: number; bytes: number; threads: number }> {
  const missing = [...new Set(files.filter((f) => store.get(f.blob) === undefined).map((f) => f.blob))];
  const pool = opts.tokenizers !== undefined ? opts.tokenizers : missing.length >= POOL_MIN_BLOBS ? sharedTokenizerPool() : null;
  const window = opts.window ?? 64;
  let bytes = 0;
  let done = 0;
  const counting: { oid: string; length: number; counted: Promise<CountedBlob> }[] = [];
  const keepOldest = async () => {
    const { oid, length, counted } = counting.shift()!;
    store.addCounted(oid, await counted, length);
    opts.onTokenized?.(++done, missing.length);
  };
  try {
    await readBlobs(
      reader,
      missing,
      async (oid, content) => {
        if (content === null) throw new Error(`blob ${oid} is listed in the tree but missing from ${reader.gitDir}`);
        bytes += content.length;
        if (pool === null) {
          store.add(oid, content);
          opts.onTokenized?.(++done, missing.length);
          return;
        }
        const counted = pool.count(content);
        counted.catch(() => undefined); // thrown where it is awaited, in order
        counting.push({ oid, length: content.length, counted });
        if (counting.length >= window) await keepOldest();
      },
      window,
    );
    while (counting.length > 0) await keepOldest();
  } finally {
    // Counts already answered are kept (so a failure loses no work); the rest are dropped.
    for (const { oid, length, counted } of counting.splice(0)) {
      const answer = await counted.catch(() => null);
      if (answer) store.addCounted(oid, answer, length);
    }
  }
  return { tokenized: missing.length, bytes, threads: pool?.size ?? 0 };
}

export async function indexCommit(
  store: BlobTermStore,
  reader: BlobReader,
  commit: string,
  opts: CommitIndexOptions = {},
): Promise<CommitIndex> {
  const t0 = performance.now();
  const listing = await (opts.listing ?? listCommitFiles(reader.gitDir, commit, opts));
  if (listing.commit !== commit) throw new Error(`indexCommit: the listing given is of commit ${listing.commit}, not ${commit}`);
  const t1 = performance.now();
  const { tokenized, bytes, threads } = await tokenizeMissingBlobs(store, reader, listing.files, opts);
  await store.flush();
  const t2 = performance.now();
  const { documents, skipped } = separateBinaryFiles(listing.files, listing.skipped, (f) => store.get(f.blob)!.binary);
  const index = buildBm25IndexOf(
    documents,
    (f) => f.path,
    (content, f) => {
      const terms = store.get(f.blob)!;
      content.addTermCounts(store.vocabulary, terms.termIds, terms.counts);
    },
    opts,
  );
  const t3 = performance.now();
  const distinct = new Set(listing.files.map((f) => f.blob)).size;
  return {
    ...index,
    commit,
    skipped,
    stats: {
      listed: listing.listed,
      candidates: listing.files.length,
      documents: documents.length,
      tokenized,
      tokenizedBytes: bytes,
      cached: distinct - tokenized,
      tokenizerThreads: threads,
      ms: { list: t1 - t0, read: t2 - t1, build: t3 - t2 },
    },
  };
}
