import * as arrow from 'apache-arrow';
import { z } from 'zod';

/** Training metrics: one row per step (`training/metrics/segment-<k>.parquet`, merged into `training/metrics.parquet`). */

export const TRAINING_METRICS_SCHEMA_NAME = 'training.metrics';
export const TRAINING_METRICS_SCHEMA_VERSION = 1;

export type TrainingMetricsRow = {
  step: number;
  epoch: number;
  rewardMean: number;
  rewardStd: number;
  rewardComponents: { name: string; value: number }[];
  /** NaN when the trainer computed no KL (β = 0 and track_kl off). */
  kl: number;
  loss: number;
  clipRatio: number;
  gradNorm: number;
  lr: number;
  turnsMean: number;
  toolCallsPerTurnMean: number;
  advantageScaleMean: number;
  answeredRatio: number;
  hitTurnLimitRatio: number;
  maskedRatio: number;
  completionLenMean: number;
  truncatedRatio: number;
  stepTimeS: number;
  rolloutTimeS: number;
  updateTimeS: number;
  rolloutTokens: number;
  trainTokens: number;
  rolloutTokensPerS: number;
  trainTokensPerS: number;
  peakGpuMemGb: number | null;
  checkpoint: string | null;
  /**
   * Where the line was recorded: segment, activity attempt and line of that attempt's stdout. Records are
   * ordered by (segment, attempt, line); the newest record of a step is the one on the checkpoint lineage
   * (a step redone after a resume was recorded after the lost one).
   */
  segment: number;
  attempt: number;
  line: number;
};

const f64 = (name: string, nullable = false) => new arrow.Field(name, new arrow.Float64(), nullable);
const i32 = (name: string) => new arrow.Field(name, new arrow.Int32(), false);

export const trainingMetricsArrowSchema = new arrow.Schema([
  i32('step'),
  i32('epoch'),
  f64('rewardMean'),
  f64('rewardStd'),
  new arrow.Field(
    'rewardComponents',
    new arrow.List(new arrow.Field('item', new arrow.Struct([new arrow.Field('name', new arrow.Utf8(), false), f64('value')]), false)),
    false,
  ),
  f64('kl'),
  f64('loss'),
  f64('clipRatio'),
  f64('gradNorm'),
  f64('lr'),
  f64('turnsMean'),
  f64('toolCallsPerTurnMean'),
  f64('advantageScaleMean'),
  f64('answeredRatio'),
  f64('hitTurnLimitRatio'),
  f64('maskedRatio'),
  f64('completionLenMean'),
  f64('truncatedRatio'),
  f64('stepTimeS'),
  f64('rolloutTimeS'),
  f64('updateTimeS'),
  i32('rolloutTokens'),
  i32('trainTokens'),
  f64('rolloutTokensPerS'),
  f64('trainTokensPerS'),
  f64('peakGpuMemGb', true),
  new arrow.Field('checkpoint', new arrow.Utf8(), true),
  i32('segment'),
  i32('attempt'),
  i32('line'),
]);

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
