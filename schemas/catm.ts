import { z } from 'zod';
import { ArtifactRefSchema } from './artifact-ref';
import { JudgeConfigSchema } from './config';
import { MiningSummarySchema } from './mining';

/** Inputs and outputs of the three CATM activities (§3.4): mine → judge → weight. Refs, never rows. */

const stageBase = {
  runId: z.string(),
  /** Absolute run directory: `<dataDir>/<runId>`. */
  runDir: z.string(),
};

export const MineInputSchema = z.object({ ...stageBase, trajectoriesPath: z.string() });
export type MineInput = z.input<typeof MineInputSchema>;
export const MineOutputSchema = z.object({
  candidates: ArtifactRefSchema,
  summary: MiningSummarySchema,
  cached: z.boolean(),
});
export type MineOutput = z.infer<typeof MineOutputSchema>;

export const JudgeCountsSchema = z.object({
  candidates: z.number().int(),
  relevant: z.number().int(),
  notRelevant: z.number().int(),
  defaulted: z.number().int(),
  skipped: z.number().int(),
  errors: z.number().int(),
  /** Judgements found in shards from an earlier attempt and not asked again. */
  resumed: z.number().int(),
});
export type JudgeCounts = z.infer<typeof JudgeCountsSchema>;

export const JudgeInputSchema = z.object({
  ...stageBase,
  candidates: ArtifactRefSchema,
  instancesPath: z.string(),
  judge: JudgeConfigSchema,
});
export type JudgeInput = z.input<typeof JudgeInputSchema>;
export const JudgeOutputSchema = z.object({
  judgements: ArtifactRefSchema,
  counts: JudgeCountsSchema,
  mode: z.enum(['llm', 'none']),
  cached: z.boolean(),
});
export type JudgeOutput = z.infer<typeof JudgeOutputSchema>;

export const WeightSummarySchema = z.object({
  beta: z.number().nullable(),
  muRaw: z.number().nullable(),
  weighted: z.number().int(),
  retained: z.number().int(),
  retentionPct: z.number().nullable(),
  instancesRead: z.number().int(),
  instancesSkipped: z.record(z.string(), z.number().int()),
  samplesWritten: z.number().int(),
  samplesWithCatm: z.number().int(),
});
export type WeightSummary = z.infer<typeof WeightSummarySchema>;

export const WeightInputSchema = z.object({
  ...stageBase,
  candidates: ArtifactRefSchema,
  judgements: ArtifactRefSchema,
  instancesPath: z.string(),
});
export type WeightInput = z.input<typeof WeightInputSchema>;
export const WeightOutputSchema = z.object({
  labels: ArtifactRefSchema,
  samples: ArtifactRefSchema,
  summary: WeightSummarySchema,
  cached: z.boolean(),
});
export type WeightOutput = z.infer<typeof WeightOutputSchema>;

export const CatmSummarySchema = z.object({
  runId: z.string(),
  mining: MiningSummarySchema,
  judge: JudgeCountsSchema.extend({ mode: z.enum(['llm', 'none']) }),
  weighting: WeightSummarySchema,
});
export type CatmSummary = z.infer<typeof CatmSummarySchema>;

export const CatmResultSchema = z.object({
  candidates: ArtifactRefSchema,
  judgements: ArtifactRefSchema,
  labels: ArtifactRefSchema,
  samples: ArtifactRefSchema,
  summary: ArtifactRefSchema,
  summaryValues: CatmSummarySchema,
});
export type CatmResult = z.infer<typeof CatmResultSchema>;

export const WriteSummaryInputSchema = z.object({
  runDir: z.string(),
  summary: CatmSummarySchema,
  inputs: z.array(ArtifactRefSchema),
});
export type WriteSummaryInput = z.infer<typeof WriteSummaryInputSchema>;
