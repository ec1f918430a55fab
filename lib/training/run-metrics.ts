import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { readParquetObjects } from '../artifacts';
import type { TrainingMetricsRow } from '../../schemas/training/metrics';
import { attemptFiles, listSegments, segmentDir, segmentMetricsPath } from './layout';
import { stepRowFromLine } from './step-lines';

/** A run's step records, from the segments' stdout logs and metrics files, with each step once. */

/** Every step line of every attempt of a segment, in (attempt, line) order. */
export function readSegmentLogRows(runDir: string, segment: number): TrainingMetricsRow[] {
  const dir = segmentDir(runDir, segment);
  if (!existsSync(dir)) return [];
  const attempts = readdirSync(dir)
    .map((name) => /^attempt-(\d+)\.stdout\.jsonl$/.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
  const rows: TrainingMetricsRow[] = [];
  for (const attempt of attempts) {
    const file = attemptFiles(dir, attempt).stdout;
    const lines = readFileSync(file, 'utf8').split('\n');
    lines.forEach((text, i) => {
      if (text.trim() === '') return;
      const row = stepRowFromLine(text, { segment, attempt, line: i + 1, file });
      if (row) rows.push(row);
    });
  }
  return rows;
}

const order = (a: TrainingMetricsRow, b: TrainingMetricsRow) => a.segment - b.segment || a.attempt - b.attempt || a.line - b.line;

/**
 * One row per step, the newest record of each (by segment, attempt, line): a step redone after a resume
 * from an earlier checkpoint replaces the record whose update was lost. Sorted by step.
 */
export function newestPerStep(rows: readonly TrainingMetricsRow[]): TrainingMetricsRow[] {
  const byStep = new Map<number, TrainingMetricsRow>();
  for (const row of [...rows].sort(order)) byStep.set(row.step, row);
  return [...byStep.values()].sort((a, b) => a.step - b.step);
}

/** Steps in 1..last with no row. */
export function missingSteps(rows: readonly TrainingMetricsRow[], last: number): number[] {
  const have = new Set(rows.map((r) => r.step));
  const missing: number[] = [];
  for (let step = 1; step <= last; step++) if (!have.has(step)) missing.push(step);
  return missing;
}

/** A row of a metrics file of any schema version: version 1 files have no policy version or staleness. */
type StoredMetricsRow = Omit<TrainingMetricsRow, 'policyVersion' | 'staleness'> &
  Partial<Pick<TrainingMetricsRow, 'policyVersion' | 'staleness'>>;

const withVersionColumns = (row: StoredMetricsRow): TrainingMetricsRow => ({
  ...row,
  policyVersion: row.policyVersion ?? null,
  staleness: row.staleness ?? null,
});

/**
 * Every recorded step of the run up to `lastStep`, each once: a segment's metrics Parquet where it wrote one,
 * else its logs (a segment whose workflow ended before it could finish).
 */
export async function runMetricsRows(runDir: string, lastStep: number): Promise<TrainingMetricsRow[]> {
  const rows: TrainingMetricsRow[] = [];
  for (const segment of listSegments(runDir)) {
    const file = segmentMetricsPath(runDir, segment);
    if (existsSync(file)) rows.push(...((await readParquetObjects(file)) as unknown as StoredMetricsRow[]).map(withVersionColumns));
    else rows.push(...readSegmentLogRows(runDir, segment));
  }
  return newestPerStep(rows).filter((row) => row.step <= lastStep);
}
