import * as arrow from 'apache-arrow';
import * as pq from 'parquet-wasm';
import { openAsBlob } from 'node:fs';
import { open, readFile } from 'node:fs/promises';
import { tableToPlainRows } from './arrow-to-plain';
import { isStoreUri, localPathForUri } from './store/local-path';
import { assertReadableFile, InputFileError } from './input-file-error';

const PARQUET_MAGIC = 'PAR1';
/** Rows decoded at a time inside one row group; bounds memory when a foreign file has huge row groups. */
const DECODE_BATCH_ROWS = 1024;

export type ParquetLayout = {
  rows: number;
  /** Rows in each row group, in file order. */
  rowGroups: number[];
  /** Distinct compression codecs of the column chunks, e.g. ['ZSTD']. */
  compressions: string[];
};

/** Row count, rows per row group and codecs, read from the footer only. */
export async function readParquetLayout(path: string): Promise<ParquetLayout> {
  const file = await openParquetFile(path);
  try {
    const metadata = file.metadata();
    const groups = metadata.rowGroups();
    const compressions = new Set(groups.flatMap((group) => group.columns().map((column) => pq.Compression[column.compression()])));
    return {
      rows: metadata.fileMetadata().numRows(),
      rowGroups: groups.map((group) => group.numRows()),
      compressions: [...compressions].map(String).sort(),
    };
  } finally {
    file.free();
  }
}

/**
 * Streams a Parquet file's rows as plain objects, one row group at a time, decoding at most
 * DECODE_BATCH_ROWS rows at once. The file is read lazily through a file-backed Blob (fs.openAsBlob), so only
 * the footer and the current row group's column chunks are ever in memory.
 */
export async function* parquetPlainRows(path: string): AsyncGenerator<Record<string, unknown>> {
  const file = await openParquetFile(path);
  try {
    const groups = file.metadata().numRowGroups();
    for (let group = 0; group < groups; group++) {
      let batches: ReadableStream<pq.RecordBatch>;
      try {
        batches = (await file.stream({ rowGroups: [group], batchSize: DECODE_BATCH_ROWS })) as ReadableStream<pq.RecordBatch>;
      } catch (err) {
        throw new InputFileError(path, `Parquet file ${path}: cannot read row group ${group}: ${errorText(err)}`);
      }
      const reader = (batches as unknown as AsyncIterable<pq.RecordBatch>)[Symbol.asyncIterator]();
      for (;;) {
        let next: IteratorResult<pq.RecordBatch>;
        try {
          next = await reader.next();
        } catch (err) {
          throw new InputFileError(path, `Parquet file ${path}: cannot decode row group ${group}: ${errorText(err)}`);
        }
        if (next.done) break;
        yield* tableToPlainRows(arrow.tableFromIPC(next.value.intoIPCStream()));
      }
    }
  } finally {
    file.free();
  }
}

/** Reads a whole (small) Parquet artifact into an Arrow table. */
export async function readParquetTable(ref: string): Promise<arrow.Table> {
  // A store URI (s3://…, file://…) reads from its node-local copy.
  const uri = isStoreUri(ref) ? await localPathForUri(ref) : ref;
  await assertParquetFile(uri);
  const bytes = await readFile(uri);
  try {
    return arrow.tableFromIPC(pq.readParquet(bytes).intoIPCStream());
  } catch (err) {
    throw new InputFileError(uri, `Parquet file ${uri} cannot be decoded: ${errorText(err)}`);
  }
}

/** Reads a whole (small) Parquet artifact as plain objects (lists → arrays, structs → objects). */
export async function readParquetObjects(uri: string): Promise<Record<string, unknown>[]> {
  return [...tableToPlainRows(await readParquetTable(uri))];
}

async function openParquetFile(path: string): Promise<pq.ParquetFile> {
  await assertParquetFile(path);
  try {
    // parquet-wasm types the handle as the DOM Blob; Node's file-backed Blob has the same slice/arrayBuffer API.
    return await pq.ParquetFile.fromFile((await openAsBlob(path)) as unknown as Parameters<typeof pq.ParquetFile.fromFile>[0]);
  } catch (err) {
    throw new InputFileError(path, `Parquet file ${path} cannot be opened: ${errorText(err)}`);
  }
}

/** Exists, is a file, and starts and ends with the Parquet magic bytes. */
async function assertParquetFile(path: string): Promise<void> {
  await assertReadableFile(path);
  const handle = await open(path, 'r');
  try {
    const { size } = await handle.stat();
    const head = Buffer.alloc(4);
    const tail = Buffer.alloc(4);
    if (size >= 12) {
      await handle.read(head, 0, 4, 0);
      await handle.read(tail, 0, 4, size - 4);
    }
    if (size < 12 || head.toString('latin1') !== PARQUET_MAGIC || tail.toString('latin1') !== PARQUET_MAGIC) {
      throw new InputFileError(
        path,
        `Input file ${path} is not a Parquet file (${size < 12 ? `only ${size} bytes` : 'no PAR1 magic bytes at its start and end'}); ` +
          'its name says .parquet, so it may be truncated or in another format',
      );
    }
  } finally {
    await handle.close();
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
