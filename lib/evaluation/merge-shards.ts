import path from 'node:path';
import { findCachedArtifact, hashConfig, readRows, writeParquetArtifact } from '../artifacts';
import type { ArtifactRef } from '../../schemas/artifact-ref';
import {
  EVALUATION_METRICS_SCHEMA_NAME,
  EVALUATION_PREDICTIONS_SCHEMA_NAME,
  EVALUATION_SCHEMA_VERSION,
  EvaluationShardRowSchema,
  METRIC_COLUMNS,
  PREDICTION_COLUMNS,
  evaluationPredictionsArrowSchema,
  instanceMetricsArrowSchema,
  type EvaluationShardRow,
} from '../../schemas/evaluation';

export async function readShardRows(refs: readonly ArtifactRef[]): Promise<EvaluationShardRow[]> {
  const rows: EvaluationShardRow[] = [];
  for (const ref of refs) {
    for await (const record of readRows(ref.uri)) {
      if ('error' in record) throw new Error(`evaluation shard ${ref.uri} row ${record.ordinal}: ${record.error}`);
      const parsed = EvaluationShardRowSchema.safeParse(record.row);
      if (!parsed.success)
        throw new Error(
          `evaluation shard ${ref.uri} row ${record.ordinal}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
        );
      rows.push(parsed.data);
    }
  }
  return rows;
}

function project(row: Record<string, unknown>, columns: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(columns.map((c) => [c, row[c]]));
}

async function mergedArtifact(
  file: string,
  schemaName: string,
  arrowSchema: typeof evaluationPredictionsArrowSchema,
  columns: readonly string[],
  rows: readonly EvaluationShardRow[],
  inputs: ArtifactRef[],
): Promise<ArtifactRef> {
  const expectation = {
    schemaName,
    schemaVersion: EVALUATION_SCHEMA_VERSION,
    inputs,
    configHash: hashConfig({ stage: schemaName, columns }),
  };
  return (
    (await findCachedArtifact(file, expectation)) ??
    writeParquetArtifact({ path: file, arrowSchema, rows: rows.map((r) => project(r, columns)), ...expectation })
  );
}

/**
 * The shards of every retriever merged into `predictions.parquet` and `metrics.parquet` in `outputDir` (one row
 * per retriever × instance; a cache hit when the shards are the same), and the rows themselves.
 */
export async function mergeShards(
  outputDir: string,
  shardRefs: ArtifactRef[],
): Promise<{ rows: EvaluationShardRow[]; predictions: ArtifactRef; metrics: ArtifactRef }> {
  const rows = await readShardRows(shardRefs);
  const predictions = await mergedArtifact(
    path.join(outputDir, 'predictions.parquet'),
    EVALUATION_PREDICTIONS_SCHEMA_NAME,
    evaluationPredictionsArrowSchema,
    PREDICTION_COLUMNS,
    rows,
    shardRefs,
  );
  const metrics = await mergedArtifact(
    path.join(outputDir, 'metrics.parquet'),
    EVALUATION_METRICS_SCHEMA_NAME,
    instanceMetricsArrowSchema,
    METRIC_COLUMNS,
    rows,
    shardRefs,
  );
  return { rows, predictions, metrics };
}
