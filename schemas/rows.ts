import { z } from 'zod';

/**
 * One record of a streamed input file (JSONL or Parquet). A row that cannot be decoded is not an exception:
 * it is yielded as an error record so the stage can count it by reason and go on with the others.
 * `ordinal` is the 1-based line number for JSONL and the 1-based row number for Parquet.
 */
export const RowRecordSchema = z.union([
  z.object({ ordinal: z.number().int().positive(), row: z.unknown() }),
  z.object({ ordinal: z.number().int().positive(), error: z.string() }),
]);
export type RowRecord = { ordinal: number; row: unknown } | { ordinal: number; error: string };
