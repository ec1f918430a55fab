import type { z } from 'zod';
import { readRows } from '../../artifacts';

/**
 * The rows of a user's file that `schema` accepts, with their row numbers. A row that cannot be read, or that
 * `schema` rejects, is skipped and described in `problems` (`row <n>: …`; `describeInvalid` says what a rejected
 * row gets wrong), so one bad row is reported and never loses the others.
 */
export async function* validRows<T>(
  file: string,
  schema: z.ZodType<T>,
  problems: string[],
  describeInvalid: (ordinal: number, row: unknown, error: z.ZodError) => string,
): AsyncGenerator<{ ordinal: number; row: T }> {
  for await (const record of readRows(file)) {
    if ('error' in record) {
      problems.push(`row ${record.ordinal}: ${record.error}`);
      continue;
    }
    const parsed = schema.safeParse(record.row);
    if (!parsed.success) {
      problems.push(describeInvalid(record.ordinal, record.row, parsed.error));
      continue;
    }
    yield { ordinal: record.ordinal, row: parsed.data };
  }
}
