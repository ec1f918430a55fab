import { z } from 'zod';

// `downstream/table.json`: CodeGrep Table 3 per configuration, pooled and paired against the baseline (lib/downstream/report/metrics.ts).

export const DOWNSTREAM_TABLE_SCHEMA_NAME = 'downstream.table';
export const DOWNSTREAM_TABLE_SCHEMA_VERSION = 1;

const count = z.number().int().nonnegative();

export const IntervalSchema = z.object({
  low: z.number(),
  high: z.number(),
  confidence: z.number(),
  resamples: z.number().int(),
  seed: z.number().int(),
});
export type Interval = z.infer<typeof IntervalSchema>;

/** A mean with its bootstrap interval; both null when the set it is taken over is empty. */
export const MeanWithIntervalSchema = z.object({
  n: count,
  mean: z.number().nullable(),
  interval: IntervalSchema.nullable(),
});
export type MeanWithInterval = z.infer<typeof MeanWithIntervalSchema>;

/** Baseline vs configuration on the instances both resolve (CodeGrep §5.3). */
export const PairedEfficiencySchema = z.object({
  n: count,
  baseline: z.number().nullable(),
  value: z.number().nullable(),
  /** value / baseline − 1 (−0.09 is "−9%"); null when undefined. */
  relativeChange: z.number().nullable(),
  /** Bootstrap interval of the mean per-instance difference (value − baseline) on the paired set. */
  differenceInterval: IntervalSchema.nullable(),
});
export type PairedEfficiency = z.infer<typeof PairedEfficiencySchema>;

export const BaselineComparisonSchema = z.object({
  baseline: z.string(),
  /** Instances run under both configurations (every paired statistic is over these). */
  common: count,
  /** Resolve-rate difference (configuration − baseline) on the common instances, as a fraction. */
  resolveRateDifference: z.number().nullable(),
  resolveRateDifferenceInterval: IntervalSchema.nullable(),
  mcnemar: z.object({
    /** Resolved by the baseline only. */
    b: count,
    /** Resolved by this configuration only. */
    c: count,
    pValue: z.number(),
  }),
  /** Instances both resolve. */
  bothResolved: count,
  pairedRounds: PairedEfficiencySchema,
  pairedTokens: PairedEfficiencySchema,
});
export type BaselineComparison = z.infer<typeof BaselineComparisonSchema>;

/** One row of CodeGrep Table 3 (Resolve, Resolved r., Resolved tok., Unresolved r.) plus intervals. */
export const DownstreamTableRowSchema = z.object({
  configuration: z.string(),
  instances: count,
  resolved: count,
  /** Rows whose outcome was `error` (counted as not resolved). */
  errors: count,
  resolveRate: z.number().nullable(),
  resolveRateInterval: IntervalSchema.nullable(),
  resolvedRounds: MeanWithIntervalSchema,
  /** Input + output tokens per resolved run. */
  resolvedTokens: MeanWithIntervalSchema,
  unresolvedRounds: MeanWithIntervalSchema,
  /** Null for the baseline row itself. */
  vsBaseline: BaselineComparisonSchema.nullable(),
});
export type DownstreamTableRow = z.infer<typeof DownstreamTableRowSchema>;

export const DownstreamTableSchema = z.object({
  baseline: z.string(),
  rows: z.array(DownstreamTableRowSchema),
});
export type DownstreamTable = z.infer<typeof DownstreamTableSchema>;

/** Per configuration: how many runs had each harness outcome (or each end reason). */
export const OutcomeCountsSchema = z.record(z.string(), z.number().int());
