import { z } from 'zod';
import { ArtifactRefSchema } from '../artifact-ref';
import { EvaluationConfigSchema, RetrieverKindSchema } from './config';
import { EvaluationExclusionsSchema, EvaluationSummarySchema } from './summary';

/** The evaluation activities' inputs and outputs (activities/evaluation-*.ts, workflows/evaluation.ts). */

/** What every evaluation activity reads: the run, its environment samples and the evaluation config. */
const evaluationInputs = {
  runId: z.string(),
  runDir: z.string(),
  samples: ArtifactRefSchema,
  evaluation: EvaluationConfigSchema,
};

export const PlanEvaluationInputSchema = z.object({
  ...evaluationInputs,
  /** Sub-folder of `evaluation/` for this execution (outputPerRun), or null for `evaluation/` itself. */
  outputLabel: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/)
    .nullable(),
});
export type PlanEvaluationInput = z.input<typeof PlanEvaluationInputSchema>;

export const RetrieverPlanSchema = z.object({
  name: z.string(),
  kind: RetrieverKindSchema,
  /** Folder of this retriever's shards; its name carries the plan hash, so it holds only this plan's shards. */
  shardDir: z.string(),
  /** Hash of everything the retriever's predictions depend on (config, instances, inputs' bytes). */
  planHash: z.string(),
  /** Extra inputs of the cache key (the predictions file). */
  inputs: z.array(ArtifactRefSchema),
});
export type RetrieverPlan = z.infer<typeof RetrieverPlanSchema>;

export const EvaluationPlanSchema = z.object({
  /** Folder of this execution's artifacts: `<runDir>/evaluation` or `<runDir>/evaluation/<label>`. */
  outputDir: z.string(),
  instances: z.number().int(),
  shardCount: z.number().int(),
  excluded: EvaluationExclusionsSchema,
  retrievers: z.array(RetrieverPlanSchema),
});
export type EvaluationPlan = z.infer<typeof EvaluationPlanSchema>;

export const EvaluateShardInputSchema = z.object({
  ...evaluationInputs,
  retriever: RetrieverPlanSchema,
  shardIndex: z.number().int().min(0),
  shardCount: z.number().int().min(1),
});
export type EvaluateShardInput = z.input<typeof EvaluateShardInputSchema>;

export const EvaluateShardOutputSchema = z.object({
  retriever: z.string(),
  shardIndex: z.number().int(),
  shard: ArtifactRefSchema,
  cached: z.boolean(),
  instances: z.number().int(),
  failed: z.number().int(),
  ms: z.number(),
});
export type EvaluateShardOutput = z.infer<typeof EvaluateShardOutputSchema>;

export const SummarizeEvaluationInputSchema = z.object({
  ...evaluationInputs,
  plan: EvaluationPlanSchema,
  /** Finished shards, per retriever in config order; a retriever whose shards failed is in `failedRetrievers`. */
  shards: z.array(z.object({ retriever: z.string(), refs: z.array(ArtifactRefSchema) })),
  failedRetrievers: z.array(z.object({ name: z.string(), reason: z.string() })),
});
export type SummarizeEvaluationInput = z.input<typeof SummarizeEvaluationInputSchema>;

export const SummarizeEvaluationOutputSchema = z.object({
  predictions: ArtifactRefSchema,
  metrics: ArtifactRefSchema,
  summary: ArtifactRefSchema,
  report: z.object({ markdown: z.string(), html: z.string() }),
  summaryValues: EvaluationSummarySchema,
});
export type SummarizeEvaluationOutput = z.infer<typeof SummarizeEvaluationOutputSchema>;

export const EvaluationResultSchema = SummarizeEvaluationOutputSchema.extend({
  outputDir: z.string(),
  shards: z.object({ total: z.number().int(), cached: z.number().int(), computed: z.number().int(), failed: z.number().int() }),
});
export type EvaluationResult = z.infer<typeof EvaluationResultSchema>;
