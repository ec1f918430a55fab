import * as arrow from 'apache-arrow';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { readManifest } from '../../artifacts/manifest';
import { readParquetTable } from '../../artifacts/read-parquet';
import { writeParquetArtifact } from '../../artifacts/write-parquet';

/**
 * Chunk embeddings of one commit's files, kept as a Parquet artifact (docs/design.md "Artifacts") so a worktree indexed again
 * is read, not re-embedded. One file per (model settings, commit):
 *
 *   <cacheDir>/<settingsKey>/<commit>.parquet   (+ .manifest.json)
 *
 * where settingsKey is a hash of the model's fingerprint and the chunking, so two models or chunkings never
 * share a file. Within the file a source file's rows are used only when its path AND the sha256 of its
 * content match: a file changed in the worktree (same commit, edited) is embedded again.
 */

export const EMBEDDING_CACHE_SCHEMA = 'dense-embeddings';
export const EMBEDDING_CACHE_SCHEMA_VERSION = 1;

export const embeddingCacheArrowSchema = new arrow.Schema([
  new arrow.Field('path', new arrow.Utf8(), false),
  new arrow.Field('content_sha256', new arrow.Utf8(), false),
  new arrow.Field('chunk', new arrow.Int32(), false),
  new arrow.Field('token_start', new arrow.Int32(), false),
  new arrow.Field('token_end', new arrow.Int32(), false),
  new arrow.Field('embedding', new arrow.List(new arrow.Field('item', new arrow.Float32(), false)), false),
]);

export interface CachedChunk {
  tokenStart: number;
  tokenEnd: number;
  embedding: Float32Array;
}

export interface CachedFile {
  contentSha256: string;
  chunks: CachedChunk[];
}

export type CacheReadStatus = 'missing' | 'read' | 'stale' | 'unreadable';

export interface CacheRead {
  status: CacheReadStatus;
  /** Why the file was not used ('stale' / 'unreadable'). */
  reason?: string;
  /** By repository-relative path. Empty unless status is 'read'. */
  files: Map<string, CachedFile>;
}

const COMMIT_PATTERN = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/;

/** Where the cache of `commit` lives. The commit becomes a file name, so it must look like one. */
export function embeddingCachePath(cacheDir: string, settingsKey: string, commit: string): string {
  if (!COMMIT_PATTERN.test(commit)) {
    throw new Error(
      `dense embedding cache: commit ${JSON.stringify(commit)} is not a commit id (letters, digits, '.', '_', '-'; at most 128)`,
    );
  }
  return path.join(path.resolve(cacheDir), settingsKey.slice(0, 16), `${commit}.parquet`);
}

/**
 * Reads the cache at `file` if its manifest carries `configHash`. A missing file is 'missing'; a file made
 * with other settings is 'stale'; a file that cannot be decoded, or whose rows do not form whole files
 * (chunks 0..n-1 of one dimension), is 'unreadable'. None of these is an error: the caller embeds instead.
 */
export async function readEmbeddingCache(file: string, configHash: string): Promise<CacheRead> {
  const files = new Map<string, CachedFile>();
  if (!existsSync(file)) return { status: 'missing', files };
  const manifest = await readManifest(file);
  if (manifest.status !== 'ok')
    return { status: 'unreadable', reason: manifest.status === 'missing' ? 'no manifest' : manifest.reason, files };
  if (manifest.manifest.configHash !== configHash) return { status: 'stale', reason: 'made with other model or chunking settings', files };
  if (manifest.manifest.schemaVersion !== EMBEDDING_CACHE_SCHEMA_VERSION) {
    return { status: 'stale', reason: `schema version ${manifest.manifest.schemaVersion}`, files };
  }
  let table: arrow.Table;
  try {
    table = await readParquetTable(file);
  } catch (error) {
    return { status: 'unreadable', reason: (error as Error).message, files };
  }
  const column = (name: string): arrow.Vector => {
    const child = table.getChild(name);
    if (!child) throw new Error(`column ${name} is missing`);
    return child;
  };
  try {
    const [paths, shas, chunkNumbers, starts, ends, embeddings] = [
      'path',
      'content_sha256',
      'chunk',
      'token_start',
      'token_end',
      'embedding',
    ].map(column) as [arrow.Vector, arrow.Vector, arrow.Vector, arrow.Vector, arrow.Vector, arrow.Vector];
    let dimension = -1;
    for (let r = 0; r < table.numRows; r++) {
      const filePath = paths.get(r) as string;
      const sha = shas.get(r) as string;
      const embedding = Float32Array.from((embeddings.get(r) as arrow.Vector<arrow.Float32>).toArray());
      if (dimension === -1) dimension = embedding.length;
      if (embedding.length !== dimension || dimension === 0)
        throw new Error(`row ${r + 1}: embedding of length ${embedding.length}, expected ${dimension}`);
      let entry = files.get(filePath);
      if (!entry) files.set(filePath, (entry = { contentSha256: sha, chunks: [] }));
      if (entry.contentSha256 !== sha || chunkNumbers.get(r) !== entry.chunks.length) {
        throw new Error(`row ${r + 1}: ${filePath} chunk ${String(chunkNumbers.get(r))} does not continue its file's chunks`);
      }
      entry.chunks.push({ tokenStart: starts.get(r) as number, tokenEnd: ends.get(r) as number, embedding });
    }
  } catch (error) {
    return { status: 'unreadable', reason: (error as Error).message, files: new Map() };
  }
  return { status: 'read', files };
}

/** Writes every file's chunks (in the given order) as the cache of one commit, atomically. */
export async function writeEmbeddingCache(file: string, configHash: string, entries: Iterable<[string, CachedFile]>): Promise<void> {
  await writeParquetArtifact({
    path: file,
    schemaName: EMBEDDING_CACHE_SCHEMA,
    schemaVersion: EMBEDDING_CACHE_SCHEMA_VERSION,
    arrowSchema: embeddingCacheArrowSchema,
    rows: cacheRows(entries),
    inputs: [],
    configHash,
    rowGroupSize: 2048,
  });
}

function* cacheRows(entries: Iterable<[string, CachedFile]>): Generator<Record<string, unknown>> {
  for (const [filePath, entry] of entries) {
    for (let c = 0; c < entry.chunks.length; c++) {
      const chunk = entry.chunks[c]!;
      yield {
        path: filePath,
        content_sha256: entry.contentSha256,
        chunk: c,
        token_start: chunk.tokenStart,
        token_end: chunk.tokenEnd,
        embedding: Array.from(chunk.embedding),
      };
    }
  }
}
