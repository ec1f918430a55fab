import * as arrow from 'apache-arrow';
import path from 'node:path';
import { hashConfig } from '../../artifacts/config-hash';
import { writeParquetArtifact } from '../../artifacts/write-parquet';
import { loadSegments, newSegmentPath } from '../blob-segments';
import type { ChunkSettings } from './dense-index';
import type { CachedChunk } from './embedding-cache';
import type { EmbeddingModel } from './embedding-model';

/**
 * Chunk embeddings keyed by git blob id: a file untouched between two commits is one blob, embedded once for
 * every commit and every run that holds it (the per-commit cache of embedding-cache.ts embedded it once per
 * commit). Keyed also by what shapes the vectors: the model's fingerprint, the content window, the overlap and
 * the chunk limit; another model or chunking never reads them.
 *
 * On disk, per repository, append-only Parquet segments, each written atomically with its manifest:
 *
 *   <root>/<settingsKey>/<owner>__<name>/emb-<time>-<pid>-<random>.parquet
 *
 * one row per chunk (a binary blob is one row with chunk −1 and no vector, so it is not read again). A segment
 * is written every `checkpointSeconds` of embedding, so a killed run loses at most that much work.
 */

export const BLOB_EMBEDDINGS_SCHEMA = 'dense-blob-embeddings';
export const BLOB_EMBEDDINGS_SCHEMA_VERSION = 1;

const arrowSchema = new arrow.Schema([
  new arrow.Field('blob', new arrow.Utf8(), false),
  new arrow.Field('chunk', new arrow.Int32(), false),
  new arrow.Field('token_start', new arrow.Int32(), false),
  new arrow.Field('token_end', new arrow.Int32(), false),
  new arrow.Field('embedding', new arrow.List(new arrow.Field('item', new arrow.Float32(), false)), false),
]);

/** A blob's chunks in order; null: the blob is binary (not a document). */
export type BlobChunks = CachedChunk[] | null;

export function blobEmbeddingsSettingsHash(model: EmbeddingModel, settings: ChunkSettings): string {
  return hashConfig({
    schema: BLOB_EMBEDDINGS_SCHEMA_VERSION,
    model: model.fingerprint,
    window: settings.window,
    overlap: settings.overlap,
    maxChunksPerFile: Number.isFinite(settings.maxChunks) ? settings.maxChunks : null,
  });
}

export function blobEmbeddingsDir(root: string, settingsHash: string, repoSlug: string): string {
  if (!/^[A-Za-z0-9._-]+$/.test(repoSlug))
    throw new Error(`blob embeddings: repository slug ${JSON.stringify(repoSlug)} is not a folder name`);
  return path.join(path.resolve(root), settingsHash.slice(0, 16), repoSlug);
}

export class BlobEmbeddingStore {
  private readonly blobs = new Map<string, BlobChunks>();
  private unsaved: string[] = [];
  readonly stats = { segmentsRead: 0, segmentsUnreadable: 0, blobsLoaded: 0, blobsEmbedded: 0, chunksEmbedded: 0, segmentsWritten: 0 };

  private constructor(
    readonly dir: string | null,
    readonly settingsHash: string,
    readonly dimension: number,
  ) {}

  /** Opens one repository's store (`dir` from blobEmbeddingsDir; null: in memory only), reading its segments. */
  static async open(dir: string | null, settingsHash: string, dimension: number): Promise<BlobEmbeddingStore> {
    const store = new BlobEmbeddingStore(dir, settingsHash, dimension);
    if (dir === null) return store;
    await loadSegments(dir, 'emb', (table) => store.load(table), store.stats);
    return store;
  }

  get size(): number {
    return this.blobs.size;
  }

  get(blob: string): BlobChunks | undefined {
    return this.blobs.get(blob);
  }

  set(blob: string, chunks: BlobChunks): void {
    if (this.blobs.has(blob)) return;
    if (chunks !== null) {
      for (const c of chunks)
        if (c.embedding.length !== this.dimension)
          throw new Error(`blob ${blob}: embedding of length ${c.embedding.length}, expected ${this.dimension}`);
      this.stats.chunksEmbedded += chunks.length;
    }
    this.blobs.set(blob, chunks);
    this.unsaved.push(blob);
    this.stats.blobsEmbedded++;
  }

  /** Writes the blobs added since the last flush as a new segment; returns how many. */
  async flush(): Promise<number> {
    const blobs = this.unsaved;
    if (this.dir === null || blobs.length === 0) return 0;
    const file = newSegmentPath(this.dir, 'emb');
    await writeParquetArtifact({
      path: file,
      schemaName: BLOB_EMBEDDINGS_SCHEMA,
      schemaVersion: BLOB_EMBEDDINGS_SCHEMA_VERSION,
      arrowSchema,
      rows: this.rows(blobs),
      inputs: [],
      configHash: this.settingsHash,
      rowGroupSize: 2048,
    });
    this.unsaved = [];
    this.stats.segmentsWritten++;
    return blobs.length;
  }

  private *rows(blobs: readonly string[]): Generator<Record<string, unknown>> {
    for (const blob of blobs) {
      const chunks = this.blobs.get(blob)!;
      if (chunks === null) {
        yield { blob, chunk: -1, token_start: 0, token_end: 0, embedding: [] };
        continue;
      }
      for (let c = 0; c < chunks.length; c++) {
        const chunk = chunks[c]!;
        yield { blob, chunk: c, token_start: chunk.tokenStart, token_end: chunk.tokenEnd, embedding: Array.from(chunk.embedding) };
      }
    }
  }

  private load(table: arrow.Table): void {
    const column = (name: string): arrow.Vector => {
      const child = table.getChild(name);
      if (!child) throw new Error(`column ${name} is missing`);
      return child;
    };
    const [blobs, chunkNumbers, starts, ends, embeddings] = ['blob', 'chunk', 'token_start', 'token_end', 'embedding'].map(column) as [
      arrow.Vector,
      arrow.Vector,
      arrow.Vector,
      arrow.Vector,
      arrow.Vector,
    ];
    const read = new Map<string, BlobChunks>();
    for (let r = 0; r < table.numRows; r++) {
      const blob = blobs.get(r) as string;
      const chunk = chunkNumbers.get(r) as number;
      if (chunk === -1) {
        read.set(blob, null);
        continue;
      }
      let chunks = read.get(blob);
      if (chunks === undefined) read.set(blob, (chunks = []));
      if (chunks === null || chunk !== chunks.length) throw new Error(`blob ${blob}: chunk ${chunk} does not continue its chunks`);
      const embedding = Float32Array.from((embeddings.get(r) as arrow.Vector<arrow.Float32>).toArray());
      if (embedding.length !== this.dimension)
        throw new Error(`blob ${blob}: embedding of length ${embedding.length}, expected ${this.dimension}`);
      chunks.push({ tokenStart: starts.get(r) as number, tokenEnd: ends.get(r) as number, embedding });
    }
    for (const [blob, chunks] of read) {
      if (this.blobs.has(blob)) continue;
      this.blobs.set(blob, chunks);
      this.stats.blobsLoaded++;
    }
  }
}
