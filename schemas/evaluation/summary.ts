import { z } from 'zod';
import { FileTargetSchema, RetrieverKindSchema } from './config';

/** The evaluation's summary.json (CodeGrep Table 2, CodeScout Table 3, Acc@k), one entry per retriever. */

/** Samples the plan left out. */
export const EvaluationExclusionsSchema = z.object({
  /** Samples whose ground truth could not be derived (no worktree, unparseable patch). */
  withoutGroundTruth: z.number().int(),
  /** Samples left out by `evaluation.instances`. */
  notSelected: z.number().int(),
});

const nullableNumber = z.number().nullable();
export const IntervalSchema = z.object({ low: z.number(), high: z.number() });
/** A mean (or share, or median) with its percentile bootstrap interval; null values when n = 0. */
export const EstimateSchema = z.object({ value: nullableNumber, ci: IntervalSchema.nullable() });
export type Estimate = z.infer<typeof EstimateSchema>;

export const LevelSummarySchema = z.object({ f1: EstimateSchema, precision: EstimateSchema, recall: EstimateSchema });
export type LevelSummary = z.infer<typeof LevelSummarySchema>;

export const RetrieverSummarySchema = z.object({
  name: z.string(),
  kind: RetrieverKindSchema,
  /** Instances scored (failed ones included, scored as empty predictions). */
  instances: z.number().int(),
  /** Instances whose prediction failed (endpoint error, missing worktree, no line in the predictions file). */
  failed: z.number().int(),
  /** CodeGrep Table 2: Fβ mean and median, precision, recall, share with Fβ ≥ 0.8, mean turns. */
  table2: z.object({
    fBetaMean: EstimateSchema,
    fBetaMedian: EstimateSchema,
    precision: EstimateSchema,
    recall: EstimateSchema,
    shareHighQuality: EstimateSchema,
    /** Agentic retrievers only. */
    turns: nullableNumber,
  }),
  /** Mean line-range Fβ (CodeGrep App. B); null when the retriever gives no line ranges. */
  lineRangeFBeta: EstimateSchema.nullable(),
  /** CodeScout Table 3; module and function are null when the retriever does not predict that level. */
  table3: z.object({ file: LevelSummarySchema, module: LevelSummarySchema.nullable(), function: LevelSummarySchema.nullable() }),
  /** Acc@k over the ranked file list (CodeScout App. G); null for retrievers without a ranking. */
  accuracyAtK: z.array(z.object({ k: z.number().int(), value: EstimateSchema })).nullable(),
  /** Agentic retrievers: mean tool calls and tokens per instance. */
  agent: z
    .object({ toolCalls: nullableNumber, promptTokens: nullableNumber, completionTokens: nullableNumber, invalidAnswers: z.number().int() })
    .nullable(),
});
export type RetrieverSummary = z.infer<typeof RetrieverSummarySchema>;

export const EvaluationSummarySchema = z.object({
  runId: z.string(),
  instances: z.number().int(),
  excluded: EvaluationExclusionsSchema,
  fileTarget: FileTargetSchema,
  beta: z.number(),
  highQualityThreshold: z.number(),
  bootstrap: z.object({ samples: z.number().int(), seed: z.number().int(), confidence: z.number() }),
  retrievers: z.array(RetrieverSummarySchema),
  failedRetrievers: z.array(z.object({ name: z.string(), reason: z.string() })),
  /** Each trained-policy retriever's checkpoint: which one answered, and what it was asked with. */
  servedPolicies: z
    .array(
      z.object({
        retriever: z.string(),
        runId: z.string(),
        step: z.number().int(),
        adapterSha256: z.string(),
        baseModel: z.string(),
        model: z.string(),
        backend: z.string(),
        answerFormat: z.string(),
        maxTurns: z.number().int().nullable(),
      }),
    )
    .default([]),
});
export type EvaluationSummary = z.infer<typeof EvaluationSummarySchema>;
