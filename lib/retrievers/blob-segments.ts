import type * as arrow from 'apache-arrow';
import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { readParquetTable } from '../artifacts/read-parquet';

/**
 * The append-only Parquet segments of a store keyed by git blob id (bm25/blob-terms.ts, dense/blob-embeddings.ts):
 * one folder per repository, each segment named `<prefix>-<time>-<pid>-<random>.parquet`, so that name order is
 * the order they were written in and two writers never pick the same name.
 */

export interface SegmentReadStats {
  segmentsRead: number;
  segmentsUnreadable: number;
}

/**
 * Loads every `<prefix>-*.parquet` segment of `dir` (none when the folder does not exist) in name order, counting
 * in `stats` those read and those that cannot be decoded.
 */
export async function loadSegments(
  dir: string,
  prefix: string,
  load: (table: arrow.Table) => void,
  stats: SegmentReadStats,
): Promise<void> {
  const names = await readdir(dir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [] as string[];
    throw error;
  });
  for (const name of names.filter((n) => n.startsWith(`${prefix}-`) && n.endsWith('.parquet')).sort()) {
    try {
      load(await readParquetTable(path.join(dir, name)));
      stats.segmentsRead++;
    } catch {
      // A segment that cannot be decoded only costs its blobs being made again.
      stats.segmentsUnreadable++;
    }
  }
}

/** The path of a new segment of `dir`. */
export function newSegmentPath(dir: string, prefix: string): string {
  return path.join(dir, `${prefix}-${Date.now().toString().padStart(14, '0')}-${process.pid}-${randomBytes(4).toString('hex')}.parquet`);
}
