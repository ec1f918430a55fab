import { readBlobs, type BlobReader } from '../../worktrees/cat-file';
import { BINARY_SNIFF_BYTES } from '../bm25/params';
import { listCommitFiles, separateBinaryFiles, type CommitFile } from '../bm25/commit-files';
import type { SkippedFile, WorktreeScanOptions } from '../bm25/worktree';
import type { BlobEmbeddingStore } from './blob-embeddings';
import { assembleDenseIndex, embedFileChunks, type ChunkSettings, type DenseIndex } from './dense-index';
import type { EmbeddingModel } from './embedding-model';

/**
 * The dense index of one commit, read from the bare repository with no checkout: the same documents as BM25
 * (commit-files.ts, App. E "Corpus"), each a blob whose chunk embeddings come from the blob-keyed store
 * (blob-embeddings.ts); only blobs the store has never seen are read (`git cat-file --batch`) and embedded.
 * `only` restricts the documents to some paths (the BM25 prefilter), still through the same store.
 */

export interface DenseEmbeddingProgress {
  /** Blobs embedded so far by this call, of `total` to embed. */
  done: number;
  total: number;
  chunks: number;
  /** Blobs per second since the call started embedding; ETA in seconds (null before the first group). */
  blobsPerSecond: number | null;
  etaSeconds: number | null;
}

export interface DenseCommitStats {
  listed: number;
  documents: number;
  /** Candidate blobs read and embedded by this call, and their chunks. */
  embedded: number;
  embeddedChunks: number;
  cached: number;
  ms: { list: number; embed: number };
}

export interface DenseCommitIndex extends Omit<DenseIndex, 'stats'> {
  skipped: SkippedFile[];
  stats: DenseCommitStats;
}

export interface DenseCommitOptions extends Pick<WorktreeScanOptions, 'includeTests' | 'extensions' | 'maxFileBytes'> {
  signal?: AbortSignal;
  /** Only these repository-relative paths are documents (the BM25 prefilter); default every file. */
  only?: ReadonlySet<string>;
  /** Blobs embedded together (default 64): the granularity of progress. */
  blobsPerGroup?: number;
  /** A segment is written after a group once this many seconds passed since the last (default 120). */
  checkpointSeconds?: number;
  onProgress?: (progress: DenseEmbeddingProgress) => void;
}

/** Embeds into `store` the blobs of `files` it lacks (binary ones are marked, not embedded). */
export async function embedMissingBlobs(
  store: BlobEmbeddingStore,
  reader: BlobReader,
  model: EmbeddingModel,
  settings: ChunkSettings,
  files: readonly CommitFile[],
  opts: Pick<DenseCommitOptions, 'blobsPerGroup' | 'checkpointSeconds' | 'onProgress'> = {},
): Promise<{ embedded: number; chunks: number }> {
  const missing = [...new Set(files.filter((f) => store.get(f.blob) === undefined).map((f) => f.blob))];
  const perGroup = opts.blobsPerGroup ?? 64;
  const checkpointMs = (opts.checkpointSeconds ?? 120) * 1000;
  const started = performance.now();
  let lastWrite = Date.now();
  let chunks = 0;
  opts.onProgress?.({ done: 0, total: missing.length, chunks: 0, blobsPerSecond: null, etaSeconds: null });
  for (let from = 0; from < missing.length; from += perGroup) {
    const group: { blob: string; text: string }[] = [];
    await readBlobs(reader, missing.slice(from, from + perGroup), (oid, content) => {
      if (content === null) throw new Error(`blob ${oid} is listed in the tree but missing from ${reader.gitDir}`);
      if (content.subarray(0, BINARY_SNIFF_BYTES).includes(0)) store.set(oid, null);
      else group.push({ blob: oid, text: content.toString('utf8') });
    });
    const embedded = await embedFileChunks(
      model,
      group.map((g) => g.text),
      settings,
    );
    group.forEach((g, i) => {
      store.set(g.blob, embedded.chunks[i]!);
      chunks += embedded.chunks[i]!.length;
    });
    const done = Math.min(missing.length, from + perGroup);
    if (done < missing.length && Date.now() - lastWrite >= checkpointMs) {
      await store.flush();
      lastWrite = Date.now();
    }
    const seconds = (performance.now() - started) / 1000;
    const rate = seconds > 0 ? done / seconds : null;
    opts.onProgress?.({
      done,
      total: missing.length,
      chunks,
      blobsPerSecond: rate,
      etaSeconds: rate ? (missing.length - done) / rate : null,
    });
  }
  await store.flush();
  return { embedded: missing.length, chunks };
}

export async function indexCommitDense(
  store: BlobEmbeddingStore,
  reader: BlobReader,
  model: EmbeddingModel,
  settings: ChunkSettings,
  commit: string,
  opts: DenseCommitOptions = {},
): Promise<DenseCommitIndex> {
  const t0 = performance.now();
  const listing = await listCommitFiles(reader.gitDir, commit, opts);
  const candidates = opts.only ? listing.files.filter((f) => opts.only!.has(f.path)) : listing.files;
  const t1 = performance.now();
  const { embedded, chunks } = await embedMissingBlobs(store, reader, model, settings, candidates, opts);
  const t2 = performance.now();
  const { documents, skipped } = separateBinaryFiles(candidates, listing.skipped, (f) => store.get(f.blob) === null);
  const index = assembleDenseIndex(
    commit,
    model,
    documents.map((f) => f.path),
    documents.map((f) => ({ chunks: store.get(f.blob)! })),
  );
  return {
    ...index,
    skipped,
    stats: {
      listed: listing.listed,
      documents: documents.length,
      embedded,
      embeddedChunks: chunks,
      cached: new Set(candidates.map((f) => f.blob)).size - embedded,
      ms: { list: t1 - t0, embed: t2 - t1 },
    },
  };
}
