import { createHash } from 'node:crypto';
import { hashConfig } from '../../artifacts/config-hash';
import { normalizeRepoPath } from '../../paths/normalize';
import type { SourceFile } from '../bm25/retriever';
import { chunkSpans, type TokenSpan } from './chunking';
import {
  embeddingCachePath,
  readEmbeddingCache,
  writeEmbeddingCache,
  type CachedChunk,
  type CachedFile,
  type CacheRead,
  type CacheReadStatus,
} from './embedding-cache';
import { contentWindow, embedTokenSequences, wrapTokens, type EmbeddingModel } from './embedding-model';
import { DEFAULT_CHUNK_OVERLAP_FRACTION } from './params';

/**
 * The dense index of a set of files: every file cut into token windows (chunking.ts), each window embedded
 * by the model; the retriever scores a file by its best chunk (retrieve.ts). With a cache directory the
 * chunk embeddings of a commit are read from / written to Parquet (embedding-cache.ts).
 */

export interface DenseIndexOptions {
  /** Tokens shared by consecutive chunks (default: DEFAULT_CHUNK_OVERLAP_FRACTION of the window). */
  chunkOverlap?: number;
  /** Embed at most this many chunks of a file, from its start (default: all). */
  maxChunksPerFile?: number;
  /** Directory of the Parquet embedding cache; no caching when absent. */
  cacheDir?: string;
  /** Sequences per onnxruntime call (default: the model's). */
  batchSize?: number;
  /** Files tokenised and embedded together (default 64): the granularity of progress and checkpoints. */
  filesPerGroup?: number;
  /**
   * With a cache, the embeddings made so far are written after a group once this many seconds have passed
   * since the last write (default 120), so an interrupted indexing run resumes instead of starting over.
   */
  checkpointSeconds?: number;
  /** Called after each group of files is embedded (for heartbeats / progress bars). */
  onProgress?: (progress: { filesDone: number; filesTotal: number }) => void;
  /**
   * `files` is a subset of the commit (e.g. one instance's candidates): keep the cached files outside it when
   * the cache is rewritten, so indexes of other subsets of the same commit still find theirs.
   */
  subsetOfCommit?: boolean;
}

export interface DenseIndexStats {
  files: number;
  chunks: number;
  /** Files embedded by this call / taken from the cache. */
  embeddedFiles: number;
  cachedFiles: number;
  /** Content tokens of the embedded files (before chunking; prompts and special tokens not counted). */
  embeddedTokens: number;
  cache: { path: string; read: CacheReadStatus; reason?: string; written: boolean } | null;
}

export interface DenseIndex {
  commit: string;
  model: EmbeddingModel;
  /** Repository-relative paths, in insertion order (= tie-break order). */
  paths: string[];
  /** Chunk c belongs to file chunkFile[c]; chunks of a file are consecutive, in file order. */
  chunkFile: Int32Array;
  chunkSpans: TokenSpan[];
  /** [chunks × dimension], row-major. */
  embeddings: Float32Array;
  /** L2 norm of each chunk's embedding (cosine scoring). */
  chunkNorms: Float64Array;
  dimension: number;
  stats: DenseIndexStats;
}

const DEFAULT_FILES_PER_GROUP = 64;
const DEFAULT_CHECKPOINT_SECONDS = 120;

function sha256Text(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** The chunk embedding settings (chunking.ts, embedding-model.ts) shared by every file of an index. */
export interface ChunkSettings {
  window: number;
  overlap: number;
  maxChunks: number;
  batchSize: number;
}

/** The chunk settings of `model` with `opts`, validated (the window is the model's document content window). */
export function chunkSettings(
  model: EmbeddingModel,
  opts: Pick<DenseIndexOptions, 'chunkOverlap' | 'maxChunksPerFile' | 'batchSize'>,
): ChunkSettings {
  const window = contentWindow(model, 'document');
  const overlap = opts.chunkOverlap ?? Math.floor(window * DEFAULT_CHUNK_OVERLAP_FRACTION);
  chunkSpans(0, window, overlap); // validates the overlap before any work
  const maxChunks = opts.maxChunksPerFile ?? Number.POSITIVE_INFINITY;
  if (maxChunks !== Number.POSITIVE_INFINITY && (!Number.isInteger(maxChunks) || maxChunks < 1)) {
    throw new RangeError(`maxChunksPerFile must be a positive integer, got ${maxChunks}`);
  }
  return { window, overlap, maxChunks, batchSize: opts.batchSize ?? model.batchSize };
}

/**
 * Cuts each text into token windows and embeds them (one onnxruntime pass over the group): per text, its chunks
 * in order; `tokens` counts the content tokens (before chunking).
 */
export async function embedFileChunks(
  model: EmbeddingModel,
  texts: readonly string[],
  settings: ChunkSettings,
): Promise<{ chunks: CachedChunk[][]; tokens: number }> {
  const { window, overlap, maxChunks } = settings;
  const sequences: number[][] = [];
  const owners: { text: number; span: TokenSpan }[] = [];
  let tokens = 0;
  texts.forEach((text, t) => {
    const ids = model.tokenizer.encode(text);
    tokens += ids.length;
    for (const span of chunkSpans(ids.length, window, overlap).slice(0, maxChunks)) {
      sequences.push(wrapTokens(model, ids.slice(span.start, span.end), 'document'));
      owners.push({ text: t, span });
    }
  });
  // A sequence with no token at all (an empty file, a tokenizer without special tokens, no prompt) cannot
  // be run; its chunk gets the zero vector, which has cosine 0 with every query.
  const runnable = sequences.map((_, s) => s).filter((s) => sequences[s]!.length > 0);
  const embedded = await embedTokenSequences(
    model,
    runnable.map((s) => sequences[s]!),
    { batchSize: settings.batchSize },
  );
  const vectors: Float32Array[] = sequences.map(() => new Float32Array(model.dimension));
  runnable.forEach((s, j) => {
    vectors[s] = embedded[j]!;
  });
  const chunks: CachedChunk[][] = texts.map(() => []);
  owners.forEach(({ text, span }, s) => {
    chunks[text]!.push({ tokenStart: span.start, tokenEnd: span.end, embedding: vectors[s]! });
  });
  return { chunks, tokens };
}

/** The index arrays of files whose chunks are known (`entries[i]` belongs to `paths[i]`). */
export function assembleDenseIndex(
  commit: string,
  model: EmbeddingModel,
  paths: string[],
  entries: readonly { chunks: readonly CachedChunk[] }[],
): Omit<DenseIndex, 'stats'> {
  const chunkCount = entries.reduce((n, e) => n + e.chunks.length, 0);
  const dimension = model.dimension;
  const embeddings = new Float32Array(chunkCount * dimension);
  const chunkFile = new Int32Array(chunkCount);
  const chunkNorms = new Float64Array(chunkCount);
  const spans: TokenSpan[] = [];
  let c = 0;
  entries.forEach((entry, i) => {
    for (const chunk of entry.chunks) {
      if (chunk.embedding.length !== dimension) {
        throw new Error(`buildDenseIndex: ${paths[i]} has an embedding of length ${chunk.embedding.length}, others have ${dimension}`);
      }
      embeddings.set(chunk.embedding, c * dimension);
      chunkFile[c] = i;
      let squares = 0;
      for (const v of chunk.embedding) squares += v * v;
      chunkNorms[c] = Math.sqrt(squares);
      spans.push({ start: chunk.tokenStart, end: chunk.tokenEnd });
      c++;
    }
  });
  return { commit, model, paths, chunkFile, chunkSpans: spans, embeddings, chunkNorms, dimension };
}

export async function buildDenseIndex(
  files: readonly SourceFile[],
  commit: string,
  model: EmbeddingModel,
  opts: DenseIndexOptions = {},
): Promise<DenseIndex> {
  const { window, overlap, maxChunks } = chunkSettings(model, opts);
  const { filesPerGroup, checkpointMs } = groupingOptions(opts);
  const paths = uniqueNormalizedPaths(files);
  const shas = files.map((f) => sha256Text(f.content));

  const settings = { model: model.fingerprint, window, overlap, maxChunksPerFile: Number.isFinite(maxChunks) ? maxChunks : null };
  const configHash = hashConfig({ commit, ...settings });
  const cachePath = opts.cacheDir === undefined ? undefined : embeddingCachePath(opts.cacheDir, hashConfig(settings), commit);
  const cached = cachePath === undefined ? undefined : await readEmbeddingCache(cachePath, configHash);

  const { entries, toEmbed } = reuseCachedFiles(paths, shas, cached, model.dimension);
  const inIndex = new Set(paths);
  const otherCached: [string, CachedFile][] = opts.subsetOfCommit && cached ? [...cached.files].filter(([p]) => !inIndex.has(p)) : [];
  const entriesSoFar = (): [string, CachedFile][] => [
    ...otherCached,
    ...paths.flatMap((p, i): [string, CachedFile][] => (entries[i] ? [[p, entries[i]]] : [])),
  ];

  const embeddedTokens = await embedUncachedFiles({
    model,
    files,
    shas,
    toEmbed,
    entries,
    settings: { window, overlap, maxChunks, batchSize: opts.batchSize ?? model.batchSize },
    filesPerGroup,
    checkpointMs,
    checkpoint: cachePath === undefined ? undefined : () => writeEmbeddingCache(cachePath, configHash, entriesSoFar()),
    onProgress: opts.onProgress,
  });

  let written = false;
  if (cachePath !== undefined && cached !== undefined && cacheOutdated(cached, paths, toEmbed.length, opts.subsetOfCommit)) {
    await writeEmbeddingCache(cachePath, configHash, entriesSoFar());
    written = true;
  }

  return {
    ...assembleDenseIndex(commit, model, paths, entries),
    stats: {
      files: files.length,
      chunks: entries.reduce((n, e) => n + e.chunks.length, 0),
      embeddedFiles: toEmbed.length,
      cachedFiles: files.length - toEmbed.length,
      embeddedTokens,
      cache:
        cachePath === undefined || cached === undefined
          ? null
          : { path: cachePath, read: cached.status, ...(cached.reason === undefined ? {} : { reason: cached.reason }), written },
    },
  };
}

/** The group size and checkpoint interval of `opts`, validated. */
function groupingOptions(opts: DenseIndexOptions): { filesPerGroup: number; checkpointMs: number } {
  const filesPerGroup = opts.filesPerGroup ?? DEFAULT_FILES_PER_GROUP;
  if (!Number.isInteger(filesPerGroup) || filesPerGroup < 1)
    throw new RangeError(`filesPerGroup must be a positive integer, got ${filesPerGroup}`);
  const checkpointMs = (opts.checkpointSeconds ?? DEFAULT_CHECKPOINT_SECONDS) * 1000;
  if (!(checkpointMs >= 0)) throw new RangeError(`checkpointSeconds must be a number >= 0, got ${opts.checkpointSeconds}`);
  return { filesPerGroup, checkpointMs };
}

/** The files' paths, normalized; an empty or repeated one is an error. */
function uniqueNormalizedPaths(files: readonly SourceFile[]): string[] {
  const paths: string[] = [];
  const seen = new Set<string>();
  for (const file of files) {
    const normalized = normalizeRepoPath(file.path);
    if (normalized === '') throw new Error(`buildDenseIndex: file #${paths.length} has an empty path (${JSON.stringify(file.path)})`);
    if (seen.has(normalized)) throw new Error(`buildDenseIndex: path ${JSON.stringify(normalized)} appears twice`);
    seen.add(normalized);
    paths.push(normalized);
  }
  return paths;
}

/**
 * The cached chunks of each file whose content is unchanged (same sha256, whole chunks of the model's dimension),
 * and the indexes of the files left to embed.
 */
function reuseCachedFiles(
  paths: readonly string[],
  shas: readonly string[],
  cached: CacheRead | undefined,
  dimension: number,
): { entries: CachedFile[]; toEmbed: number[] } {
  const entries = new Array<CachedFile>(paths.length);
  const toEmbed: number[] = [];
  paths.forEach((_, i) => {
    const hit = cached?.files.get(paths[i]!);
    if (
      hit !== undefined &&
      hit.contentSha256 === shas[i] &&
      hit.chunks.length > 0 &&
      hit.chunks.every((c) => c.embedding.length === dimension)
    ) {
      entries[i] = hit;
    } else toEmbed.push(i);
  });
  return { entries, toEmbed };
}

interface EmbedWork {
  model: EmbeddingModel;
  files: readonly SourceFile[];
  shas: readonly string[];
  /** Indexes into `files` of those to embed; their `entries` are filled in group by group. */
  toEmbed: readonly number[];
  entries: CachedFile[];
  settings: ChunkSettings;
  filesPerGroup: number;
  checkpointMs: number;
  /** Writes the cache with what is embedded so far; undefined: no cache. */
  checkpoint: (() => Promise<void>) | undefined;
  onProgress: DenseIndexOptions['onProgress'];
}

/** Embeds the files left to embed, a group at a time, checkpointing the cache on the way; returns their content tokens. */
async function embedUncachedFiles(work: EmbedWork): Promise<number> {
  const { files, toEmbed, entries, filesPerGroup } = work;
  let embeddedTokens = 0;
  let lastWrite = Date.now();
  if (toEmbed.length === 0) work.onProgress?.({ filesDone: files.length, filesTotal: files.length });
  for (let from = 0; from < toEmbed.length; from += filesPerGroup) {
    const group = toEmbed.slice(from, from + filesPerGroup);
    const embeddedGroup = await embedFileChunks(
      work.model,
      group.map((i) => files[i]!.content),
      work.settings,
    );
    group.forEach((i, g) => {
      entries[i] = { contentSha256: work.shas[i]!, chunks: embeddedGroup.chunks[g]! };
    });
    embeddedTokens += embeddedGroup.tokens;
    const more = from + group.length < toEmbed.length;
    if (work.checkpoint !== undefined && more && Date.now() - lastWrite >= work.checkpointMs) {
      await work.checkpoint();
      lastWrite = Date.now();
    }
    work.onProgress?.({ filesDone: files.length - toEmbed.length + from + group.length, filesTotal: files.length });
  }
  return embeddedTokens;
}

/** Whether the cache file must be written again: files were embedded, its file set differs, or it was not read cleanly. */
function cacheOutdated(cached: CacheRead, paths: readonly string[], embeddedFiles: number, subsetOfCommit: boolean | undefined): boolean {
  const sameFileSet = (subsetOfCommit || cached.files.size === paths.length) && paths.every((p) => cached.files.has(p));
  return embeddedFiles > 0 || !sameFileSet || cached.status !== 'read';
}
