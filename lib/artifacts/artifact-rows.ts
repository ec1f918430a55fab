import { readRows } from './read-rows';

/**
 * The rows of an artifact this project wrote, each passed through `parse` (a zod schema's parse). A row that
 * cannot be read means the artifact is broken, not the user's input: it throws naming `what`, the file and row.
 */
export async function* readArtifactRows<T>(uri: string, parse: (row: unknown) => T, what = 'artifact'): AsyncGenerator<T> {
  for await (const record of readRows(uri)) {
    if ('error' in record) throw new Error(`${what} ${uri} row ${record.ordinal}: ${record.error}`);
    yield parse(record.row);
  }
}
