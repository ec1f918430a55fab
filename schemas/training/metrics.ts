import { z } from 'zod';
import { columns, float64, int32, list, nullable, struct, utf8 } from '../columns';

/** Training metrics: one row per step (`training/metrics/segment-<k>.parquet`, merged into `training/metrics.parquet`). */

export const TRAINING_METRICS_SCHEMA_NAME = 'training.metrics';
export const TRAINING_METRICS_SCHEMA_VERSION = 2;

export const trainingMetricsColumns = columns({
  step: int32(),
  epoch: int32(),
  rewardMean: float64(),
  rewardStd: float64(),
  rewardComponents: list(struct({ name: utf8(), value: float64() })),
  /** NaN when the trainer computed no KL (β = 0 and track_kl off). */
  kl: float64(z.union([z.number(), z.nan()])),
  loss: float64(),
  clipRatio: float64(),
  gradNorm: float64(),
  lr: float64(),
  turnsMean: float64(),
  toolCallsPerTurnMean: float64(),
  advantageScaleMean: float64(),
  answeredRatio: float64(),
  hitTurnLimitRatio: float64(),
  maskedRatio: float64(),
  completionLenMean: float64(),
  truncatedRatio: float64(),
  stepTimeS: float64(),
  rolloutTimeS: float64(),
  updateTimeS: float64(),
  rolloutTokens: int32(),
  trainTokens: int32(),
  rolloutTokensPerS: float64(),
  trainTokensPerS: float64(),
  peakGpuMemGb: nullable(float64()),
  /**
   * The sampling policy's version and the step's staleness (trainer/README.md "Output"; CodeScout §3.4);
   * null for lines of trainers that did not write them (schema version 1 files have neither column).
   */
  policyVersion: nullable(int32()),
  staleness: nullable(int32()),
  checkpoint: nullable(utf8()),
  /**
   * Where the line was recorded: segment, activity attempt and line of that attempt's stdout. Records are
   * ordered by (segment, attempt, line); the newest record of a step is the one on the checkpoint lineage
   * (a step redone after a resume was recorded after the lost one).
   */
  segment: int32(),
  attempt: int32(),
  line: int32(),
});
export type TrainingMetricsRow = z.infer<typeof trainingMetricsColumns.zod>;

export const trainingMetricsArrowSchema = trainingMetricsColumns.arrowSchema();

/** What the workflow shows of the newest step. */
export const LatestStepMetricsSchema = z.object({
  step: z.number().int(),
  rewardMean: z.number(),
  /** null when the trainer computed no KL. */
  kl: z.number().nullable(),
  turnsMean: z.number(),
  completionLenMean: z.number(),
  toolCallsPerTurnMean: z.number(),
  stepTimeS: z.number(),
});
export type LatestStepMetrics = z.infer<typeof LatestStepMetricsSchema>;
