import { hashConfig, writeParquetArtifact } from '../artifacts';
import type { ArtifactRef } from '../../schemas/artifact-ref';
import {
  TRAINING_METRICS_SCHEMA_NAME,
  TRAINING_METRICS_SCHEMA_VERSION,
  trainingMetricsArrowSchema,
  type TrainingMetricsRow,
} from '../../schemas/training/metrics';
import { segmentMetricsPath } from './layout';
import { newestPerStep, readSegmentLogRows } from './run-metrics';

/** The segment's steps (fromStep, upTo], each once, as `training/metrics/segment-<k>.parquet`. */
export async function writeSegmentMetrics(
  input: { runDir: string; segment: number; fromStep: number; samples: ArtifactRef },
  upTo: number,
): Promise<{ ref: ArtifactRef; rows: TrainingMetricsRow[] }> {
  const rows = newestPerStep(readSegmentLogRows(input.runDir, input.segment)).filter((r) => r.step > input.fromStep && r.step <= upTo);
  const ref = await writeParquetArtifact({
    path: segmentMetricsPath(input.runDir, input.segment),
    schemaName: TRAINING_METRICS_SCHEMA_NAME,
    schemaVersion: TRAINING_METRICS_SCHEMA_VERSION,
    arrowSchema: trainingMetricsArrowSchema,
    rows,
    inputs: [input.samples],
    configHash: hashConfig({ stage: 'training-segment', segment: input.segment, fromStep: input.fromStep, upTo }),
  });
  return { ref, rows };
}
