import * as arrow from 'apache-arrow';
import * as pq from 'parquet-wasm';
import { resolve } from 'node:path';
import type { ArtifactRef } from '../../schemas/artifact-ref';
import { writeFileAtomically } from './atomic-write';
import { parseProvenance, writeManifest } from './manifest';
import { assertSupportedSchema, rowsToRecordBatch } from './rows-to-arrow';

export const DEFAULT_ROW_GROUP_SIZE = 10_000;

export type WriteParquetOptions = {
  path: string;
  schemaName: string;
  schemaVersion: number;
  arrowSchema: arrow.Schema;
  rows: Iterable<Record<string, unknown>> | AsyncIterable<Record<string, unknown>>;
  inputs: ArtifactRef[];
  configHash: string;
  /** Rows per Parquet row group, and per conversion batch (memory is bounded by one batch). */
  rowGroupSize?: number;
};

/**
 * Streams rows into a zstd Parquet file and writes its manifest (docs/design.md "Artifacts"). Rows are converted to Arrow one
 * row group at a time and the encoded bytes go straight to disk, so memory holds one batch, not the file.
 * The file appears at `path` only when complete (temp file + fsync + rename); if the rows iterator or a
 * value fails midway, nothing is left behind and an earlier artifact at `path` is untouched.
 */
export async function writeParquetArtifact(opts: WriteParquetOptions): Promise<ArtifactRef> {
  const path = resolve(opts.path);
  const provenance = parseProvenance(opts, path);
  const rowGroupSize = opts.rowGroupSize ?? DEFAULT_ROW_GROUP_SIZE;
  if (!Number.isInteger(rowGroupSize) || rowGroupSize < 1) {
    throw new RangeError(`writeParquetArtifact ${path}: rowGroupSize must be a positive integer, got ${rowGroupSize}`);
  }
  assertSupportedSchema(opts.arrowSchema, path);
  // The Parquet footer then says what it holds even without the manifest.
  const schema = new arrow.Schema(
    opts.arrowSchema.fields,
    new Map([
      ...opts.arrowSchema.metadata,
      ['codegrep.schema', provenance.schemaName],
      ['codegrep.schemaVersion', String(provenance.schemaVersion)],
    ]),
  );

  const source = batchSource(schema, opts.rows, rowGroupSize, path);
  const { sha256 } = await writeFileAtomically(path, async (write) => {
    const properties = new pq.WriterPropertiesBuilder().setCompression(pq.Compression.ZSTD).setMaxRowGroupSize(rowGroupSize).build();
    // parquet-wasm ends its output normally when the input stream errors after the first batch (which would
    // leave a valid-looking file holding only the rows before the failure), and fails with an opaque
    // "Dyn casting error" when it errors before: either way the source's own failure is what is thrown.
    try {
      const encoded = await pq.transformParquetStream(source.stream, properties);
      for await (const chunk of encoded as unknown as AsyncIterable<Uint8Array>) await write(chunk);
    } catch (err) {
      throw source.failure ? source.failure.error : err;
    }
    if (source.failure) throw source.failure.error;
  }).catch(async (err: unknown) => {
    await source.release();
    throw err;
  });
  return writeManifest(path, { rows: source.rowCount(), sha256, provenance });
}

type BatchSource = {
  stream: ReadableStream<pq.RecordBatch>;
  rowCount(): number;
  /** Lets the rows iterator clean up when the write fails for a reason of its own (disk full, encoder error). */
  release(): Promise<void>;
  failure: { error: unknown } | undefined;
};

function batchSource(
  schema: arrow.Schema,
  rows: Iterable<Record<string, unknown>> | AsyncIterable<Record<string, unknown>>,
  rowGroupSize: number,
  path: string,
): BatchSource {
  const iterator: Iterator<Record<string, unknown>> | AsyncIterator<Record<string, unknown>> =
    Symbol.asyncIterator in rows ? rows[Symbol.asyncIterator]() : rows[Symbol.iterator]();
  let written = 0;
  let sentAny = false;
  let done = false;
  const source: BatchSource = {
    failure: undefined,
    rowCount: () => written,
    release: async () => {
      if (done) return;
      done = true;
      await closeQuietly(iterator);
    },
    stream: new ReadableStream<pq.RecordBatch>(
      {
        async pull(controller) {
          try {
            if (done) {
              controller.close();
              return;
            }
            const batch: Record<string, unknown>[] = [];
            while (batch.length < rowGroupSize) {
              const next = await iterator.next();
              if (next.done) {
                done = true;
                break;
              }
              batch.push(next.value);
            }
            // A file needs at least one batch to carry the schema, even with zero rows.
            if (batch.length === 0 && sentAny) {
              controller.close();
              return;
            }
            const arrowBatch = rowsToRecordBatch(schema, batch, written + 1);
            controller.enqueue(toWasmBatch(arrowBatch));
            sentAny = true;
            written += batch.length;
          } catch (err) {
            const error =
              err instanceof Error && err.name === 'ArrowRowError'
                ? new Error(`writeParquetArtifact ${path}: ${err.message}`, { cause: err })
                : err;
            source.failure = { error };
            done = true;
            await closeQuietly(iterator);
            controller.error(error);
          }
        },
      },
      { highWaterMark: 0 },
    ),
  };
  return source;
}

// The iterator's own cleanup error must not hide the failure that made us stop it.
async function closeQuietly(iterator: Iterator<unknown> | AsyncIterator<unknown>): Promise<void> {
  try {
    await iterator.return?.();
  } catch {
    // see above
  }
}

function toWasmBatch(batch: arrow.RecordBatch): pq.RecordBatch {
  const wasmTable = pq.Table.fromIPCStream(arrow.tableToIPC(new arrow.Table(batch), 'stream'));
  try {
    const wasmBatch = wasmTable.recordBatch(0);
    if (!wasmBatch) throw new Error('parquet-wasm lost the record batch while importing it');
    return wasmBatch;
  } finally {
    wasmTable.free();
  }
}
