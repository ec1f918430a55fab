import * as arrow from 'apache-arrow';
import path from 'node:path';
import { hashConfig } from '../../artifacts/config-hash';
import { writeParquetArtifact } from '../../artifacts/write-parquet';
import { loadSegments, newSegmentPath } from '../blob-segments';
import { BlobCounter, joinTerms, type BlobTerms, type CountedBlob } from './blob-counter';
import { BINARY_SNIFF_BYTES } from './params';
import { FNV_PRIME, HASH_SEED, TermTable } from './term-table';

export type { BlobTerms, CountedBlob } from './blob-counter';

/**
 * Tokenized documents keyed by git blob id: a file untouched between two commits is one blob, so it is read and
 * tokenized once for every commit (and every run) that holds it. What is kept per blob is what BM25 needs of a
 * document (CodeGrep App. E): its distinct terms in the order they first appear, and how often each occurs;
 * IDF and the length normalisation stay per commit (commit-index.ts builds them from these counts), so the
 * scores are exactly those of a from-scratch index.
 *
 * On disk, per repository, append-only Parquet segments, each written atomically with its manifest:
 *
 *   <root>/<settingsKey>/<owner>__<name>/terms-<time>-<pid>-<random>.parquet
 *
 * where settingsKey hashes what shapes the counts (the tokenizer's version, the binary sniff), so another
 * tokenizer never reads them. A segment is written after each batch of new blobs, so a killed run keeps what it
 * tokenized; two workers that tokenize the same blob at once both write it, and the first segment read wins
 * (the rows are identical).
 */

export const BLOB_TERMS_SCHEMA = 'bm25-blob-terms';
export const BLOB_TERMS_SCHEMA_VERSION = 1;
/** Bump when the App. E tokenizer (tokenizer.ts) changes what it emits: cached counts are then not reused. */
export const BM25_TOKENIZER_VERSION = 1;

const blobTermsArrowSchema = new arrow.Schema([
  new arrow.Field('blob', new arrow.Utf8(), false),
  new arrow.Field('binary', new arrow.Bool(), false),
  /** The distinct terms, first appearance first, joined by a space (App. E tokens never hold whitespace). */
  new arrow.Field('terms', new arrow.Utf8(), false),
  new arrow.Field('counts', new arrow.List(new arrow.Field('item', new arrow.Int32(), false)), false),
]);

export interface BlobTermStats {
  segmentsRead: number;
  segmentsUnreadable: number;
  blobsLoaded: number;
  /** Blobs tokenized by this store (not found cached), and their bytes. */
  blobsTokenized: number;
  bytesTokenized: number;
  segmentsWritten: number;
}

const SPACE = 0x20;

/** Hash of what shapes the stored counts; its first 16 characters name the settings folder. */
export function blobTermsSettingsHash(): string {
  return hashConfig({ schema: BLOB_TERMS_SCHEMA_VERSION, tokenizer: BM25_TOKENIZER_VERSION, binarySniffBytes: BINARY_SNIFF_BYTES });
}

/** Where the segments of `repoSlug` (`owner__name`) live under `root`. */
export function blobTermsDir(root: string, repoSlug: string): string {
  if (!/^[A-Za-z0-9._-]+$/.test(repoSlug)) throw new Error(`blob terms: repository slug ${JSON.stringify(repoSlug)} is not a folder name`);
  return path.join(path.resolve(root), blobTermsSettingsHash().slice(0, 16), repoSlug);
}

export class BlobTermStore {
  readonly vocabulary = new TermTable();
  private readonly blobs = new Map<string, BlobTerms>();
  private unsaved: string[] = [];
  readonly stats: BlobTermStats = {
    segmentsRead: 0,
    segmentsUnreadable: 0,
    blobsLoaded: 0,
    blobsTokenized: 0,
    bytesTokenized: 0,
    segmentsWritten: 0,
  };
  private readonly counter = new BlobCounter(this.vocabulary);
  /** Terms text of unsaved blobs counted in another thread (the segment row as it came). */
  private readonly unsavedText = new Map<string, string>();

  /** `dir` null: in memory only (nothing read or written). */
  private constructor(readonly dir: string | null) {}

  /** Opens the store of one repository, reading every segment already on disk (`dir` from blobTermsDir). */
  static async open(dir: string | null): Promise<BlobTermStore> {
    const store = new BlobTermStore(dir);
    if (dir === null) return store;
    await loadSegments(dir, 'terms', (table) => store.load(table), store.stats);
    return store;
  }

  get size(): number {
    return this.blobs.size;
  }

  get(blob: string): BlobTerms | undefined {
    return this.blobs.get(blob);
  }

  /** Tokenizes a blob's bytes (decoded as UTF-8, as worktree.ts reads a file) and keeps its counts. */
  add(blob: string, bytes: Buffer): BlobTerms {
    const known = this.blobs.get(blob);
    if (known) return known;
    return this.keep(blob, this.counter.count(bytes), bytes.length);
  }

  /** Keeps the counts of a blob of `byteLength` bytes tokenized elsewhere (tokenizer-pool.ts). */
  addCounted(blob: string, counted: CountedBlob, byteLength: number): BlobTerms {
    const known = this.blobs.get(blob);
    if (known) return known;
    const termIds = this.internTerms(blob, counted.terms, counted.counts.length);
    this.unsavedText.set(blob, counted.terms);
    return this.keep(blob, { binary: counted.binary, termIds, counts: counted.counts }, byteLength);
  }

  private keep(blob: string, terms: BlobTerms, byteLength: number): BlobTerms {
    this.blobs.set(blob, terms);
    this.unsaved.push(blob);
    this.stats.blobsTokenized++;
    this.stats.bytesTokenized += byteLength;
    return terms;
  }

  /** Writes the blobs tokenized since the last flush as a new segment; returns how many. */
  async flush(): Promise<number> {
    const blobs = this.unsaved;
    if (this.dir === null || blobs.length === 0) return 0;
    // Blobs added while this segment is written go to the next one.
    this.unsaved = [];
    const file = newSegmentPath(this.dir, 'terms');
    try {
      await writeParquetArtifact({
        path: file,
        schemaName: BLOB_TERMS_SCHEMA,
        schemaVersion: BLOB_TERMS_SCHEMA_VERSION,
        arrowSchema: blobTermsArrowSchema,
        rows: this.rows(blobs),
        inputs: [],
        configHash: blobTermsSettingsHash(),
        rowGroupSize: 1024,
      });
    } catch (error) {
      this.unsaved = blobs.concat(this.unsaved);
      throw error;
    }
    for (const blob of blobs) this.unsavedText.delete(blob);
    this.stats.segmentsWritten++;
    return blobs.length;
  }

  private *rows(blobs: readonly string[]): Generator<Record<string, unknown>> {
    for (const blob of blobs) {
      const entry = this.blobs.get(blob)!;
      const terms = this.unsavedText.get(blob) ?? joinTerms(this.vocabulary, entry.termIds);
      yield { blob, binary: entry.binary, terms, counts: entry.counts };
    }
  }

  private load(table: arrow.Table): void {
    const blobs = table.getChild('blob');
    const binaries = table.getChild('binary');
    const termTexts = table.getChild('terms');
    const countLists = table.getChild('counts');
    if (!blobs || !binaries || !termTexts || !countLists) throw new Error('a column is missing');
    for (let r = 0; r < table.numRows; r++) {
      const blob = blobs.get(r) as string;
      if (this.blobs.has(blob)) continue;
      const counts = Int32Array.from((countLists.get(r) as arrow.Vector<arrow.Int32>).toArray());
      const termIds = this.internTerms(blob, termTexts.get(r) as string, counts.length);
      this.blobs.set(blob, { binary: binaries.get(r) as boolean, termIds, counts });
      this.stats.blobsLoaded++;
    }
  }

  private units = new Uint16Array(256);

  /** Ids in the vocabulary of the `expected` space-separated terms of `text` (a segment row's terms). */
  private internTerms(blob: string, text: string, expected: number): Int32Array {
    const termIds = new Int32Array(expected);
    let units = this.units;
    let k = 0;
    let length = 0;
    let hash = HASH_SEED;
    for (let i = 0; i <= text.length; i++) {
      const c = i === text.length ? SPACE : text.charCodeAt(i);
      if (c !== SPACE) {
        if (length === units.length) {
          const grown = new Uint16Array(units.length * 2);
          grown.set(units);
          units = this.units = grown;
        }
        units[length++] = c;
        hash = Math.imul(hash ^ c, FNV_PRIME);
        continue;
      }
      if (length === 0) continue;
      if (k === expected) throw new Error(`blob ${blob}: more terms than counts`);
      termIds[k++] = this.vocabulary.intern(units, 0, length, hash);
      length = 0;
      hash = HASH_SEED;
    }
    if (k !== expected) throw new Error(`blob ${blob}: ${k} terms but ${expected} counts`);
    return termIds;
  }
}
