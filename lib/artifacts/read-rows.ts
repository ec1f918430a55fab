import { extname } from 'node:path';
import type { RowRecord } from '../../schemas/rows';
import { assertReadableFile, InputFileError } from './input-file-error';
import { jsonlRowRecords } from './read-jsonl';
import { parquetPlainRows } from './read-parquet';
import { isStoreUri, localPathForUri } from './store/local-path';
import type { StoreSettings } from './store/settings';

export const ROW_FILE_EXTENSIONS = ['.jsonl', '.ndjson', '.parquet'] as const;

/**
 * Streams the rows of an input file (JSON Lines or Parquet, chosen by extension) as RowRecords. Bad rows
 * are yielded as error records; only a file that cannot be read at all (missing, a directory, an unknown
 * extension, not really Parquet) throws an InputFileError naming it.
 */
export async function* readRows(uri: string, storeSettings?: StoreSettings): AsyncGenerator<RowRecord> {
  // A store URI (s3://…, file://…) reads from its node-local copy: with the caller's store settings (a worker's,
  // read at its start), else this process's environment.
  const path = isStoreUri(uri) ? await localPathForUri(uri, storeSettings) : uri;
  const extension = extname(path).toLowerCase();
  if (!(ROW_FILE_EXTENSIONS as readonly string[]).includes(extension)) {
    await assertReadableFile(path);
    throw new InputFileError(
      path,
      `Input file ${path} has ${extension ? `extension ${extension}` : 'no extension'}; accepted: ${ROW_FILE_EXTENSIONS.join(', ')}`,
    );
  }
  await assertReadableFile(path);
  if (extension === '.parquet') {
    let ordinal = 0;
    for await (const row of parquetPlainRows(path)) yield { ordinal: ++ordinal, row };
    return;
  }
  yield* jsonlRowRecords(path);
}
