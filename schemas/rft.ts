import { z } from 'zod';
import { AgentLimitsSchema } from './agent';
import { ArtifactRefSchema } from './artifact-ref';
import { bool, columns, float64, int32, list, nullable, utf8 } from './columns';
import { CheckpointChoiceSchema } from './policy-server';
import { ResolvedTrainingConfigSchema } from './training/config';
import { flagRepeatedInstances } from './unique-instances';

/**
 * The `rft` stage: CodeScout §4.1's warm start by rejection-sampling fine-tuning. A teacher (an
 * OpenAI-compatible endpoint, or a checkpoint of an earlier run served by codegrep's policy server) runs the
 * same agent loop, tools and reward as training on `instances`; the rollouts whose per-level F1 clear the
 * keep threshold (the preset's, lib/recipes/presets.json `rft`) are fine-tuned on with `python -m trainer.sft`,
 * and the training stage starts from that checkpoint (`init_from`). Pure zod: safe to import from workflows.
 */

const positiveInt = z.number().int().min(1);
const f1Threshold = z.number().min(0).max(1);

export const RftTeacherSchema = z.union([
  z
    .object({
      baseUrl: z.string().url(),
      model: z.string().min(1),
      /** Name of the environment variable with the API key (the key never enters workflow history). */
      apiKeyEnv: z.string().min(1).optional(),
    })
    .strict(),
  z
    .object({
      /** A checkpoint of an earlier run in the same data dir, served on the GPU worker (workflows/policy-server.ts). */
      policy: z
        .object({
          run: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'policy.run must be a runId'),
          checkpoint: CheckpointChoiceSchema.optional(),
        })
        .strict(),
    })
    .strict(),
]);
export type RftTeacher = z.infer<typeof RftTeacherSchema>;

/** Per-level minimum F1 for a rollout to be kept; a level left out takes the preset's value. */
export const RftKeepSchema = z
  .object({ file: f1Threshold.optional(), module: f1Threshold.optional(), function: f1Threshold.optional() })
  .strict();

/**
 * trainer.sft's settings (LEARN_TASK contract). Paper values are NOT defaulted here: a field left out is not
 * written, and the trainer takes it from the `rft` preset (CodeScout §4.1: lr 5e-5, cosine, warmup 0.1, batch 8,
 * one epoch).
 */
export const RftSftSchema = z
  .object({
    /** Default: training.modelDir (the model the training stage then starts from this checkpoint). */
    modelDir: z.string().min(1).optional(),
    finetune: z.enum(['lora', 'full']).optional(),
    lora: z.object({ r: positiveInt.optional(), alpha: z.number().positive().optional() }).strict().optional(),
    lr: z.number().positive().optional(),
    lrSchedule: z.enum(['cosine', 'constant']).optional(),
    warmupRatio: z.number().min(0).lt(1).optional(),
    epochs: positiveInt.optional(),
    globalBatchSize: positiveInt.optional(),
    saveEvery: positiveInt.optional(),
    keepCheckpoints: positiveInt.optional(),
    seed: z.number().int().min(0).default(0),
    /** Any other trainer.sft key, passed as is. */
    trainer: z.record(z.string(), z.unknown()).default({}),
    /** How long a stopped trainer may take to checkpoint and exit before it is killed. */
    stopGraceMs: positiveInt.default(60_000),
  })
  .strict();
export type RftSft = z.infer<typeof RftSftSchema>;

export const RftConfigSchema = z
  .object({
    /** The instances the teacher is sampled on; they are taken out of the RL training samples (CodeScout §4.1). */
    instances: z.array(z.string().min(1)).min(1, 'rft.instances: list the instance ids to sample the teacher on'),
    teacher: RftTeacherSchema,
    keep: RftKeepSchema.default({}),
    /** Sampling temperature of the teacher (default: the endpoint's). */
    temperature: z.number().min(0).optional(),
    topP: z.number().gt(0).max(1).optional(),
    /** Default: the training section's turn and tool-call limits (the episodes the student will run). */
    limits: AgentLimitsSchema.optional(),
    /** Instances per sampling activity: the unit of parallelism and of resumption. */
    shardSize: positiveInt.default(16),
    maxConcurrentShards: positiveInt.default(4),
    /** Episodes of one shard in flight at once. */
    concurrency: positiveInt.default(4),
    /** Per-request timeout of the teacher endpoint (ms). */
    timeoutMs: positiveInt.default(120_000),
    sft: RftSftSchema.prefault({}),
  })
  .strict()
  .superRefine((rft, ctx) => flagRepeatedInstances(rft.instances, ctx));
export type RftConfig = z.infer<typeof RftConfigSchema>;
export type RftConfigInput = z.input<typeof RftConfigSchema>;

// ---------------------------------------------------------------------------------------------------------
// Artifacts

/**
 * One sampled rollout: who sampled it, its reward and per-level F1 (null: the answer format names no such
 * level, e.g. CodeGrep's `<answer>` has no functions), whether it was kept, the conversation and tools as
 * trainer.sft reads them (JSON text), and, for kept rows after fine-tuning, the token ids and policy mask
 * trainer.sft tokenized them to (its tokens_out).
 */
export const rftTrajectoryColumns = columns({
  instanceId: utf8(z.string().min(1)),
  teacher: utf8(),
  reward: float64(),
  fileF1: float64(),
  moduleF1: nullable(float64()),
  functionF1: nullable(float64()),
  kept: bool(),
  endReason: nullable(utf8()),
  turns: int32(),
  toolCalls: int32(),
  /** Why the rollout failed (the endpoint rejected it, no worktree); never kept. */
  error: nullable(utf8()),
  messages: utf8(),
  tools: utf8(),
  inputIds: nullable(list(int32())),
  policyMask: nullable(list(int32())),
});
export type RftTrajectoryRow = z.infer<typeof rftTrajectoryColumns.zod>;
export const RFT_SHARD_SCHEMA_NAME = 'rft.shard';
export const RFT_SAMPLED_SCHEMA_NAME = 'rft.sampled';
export const RFT_TRAJECTORIES_SCHEMA_NAME = 'rft.trajectories';
export const RFT_SCHEMA_VERSION = 1;

/** One optimizer step of trainer.sft, once (the newest attempt's line wins). */
export const rftSftStepColumns = columns({ step: int32(), loss: float64(), lr: nullable(float64()), attempt: int32() });
export type RftSftStepRow = z.infer<typeof rftSftStepColumns.zod>;
export const RFT_SFT_METRICS_SCHEMA_NAME = 'rft.sft-metrics';

// ---------------------------------------------------------------------------------------------------------
// Activity I/O

const common = { runId: z.string(), runDir: z.string() };

export const PlanRftInputSchema = z.object({
  ...common,
  samples: ArtifactRefSchema,
  rft: RftConfigSchema,
  training: ResolvedTrainingConfigSchema,
});
export type PlanRftInput = z.input<typeof PlanRftInputSchema>;

export const RftPlanSchema = z.object({
  instances: z.number().int(),
  shardCount: z.number().int(),
  /** Hash of everything a rollout depends on but the teacher (instances, samples, recipe, limits, sampling). */
  planHash: z.string(),
  /** The environment samples without the RFT instances: what RL trains on (CodeScout §4.1: "not seen during RFT"). */
  trainingSamples: ArtifactRefSchema,
  /** The environment samples of the RFT instances only. */
  rftSamples: ArtifactRefSchema,
});
export type RftPlan = z.infer<typeof RftPlanSchema>;

/** The teacher as the sampling activity reaches it; `identity` names it in the shards' folder and the rows. */
export const ResolvedTeacherSchema = z.object({
  baseUrl: z.string(),
  model: z.string(),
  apiKeyEnv: z.string().optional(),
  /** `model@baseUrl`, or `run:step:adapterSha256` for a served checkpoint (not its port). */
  identity: z.string(),
  /** What the rows' `teacher` column says. */
  label: z.string(),
});
export type ResolvedTeacher = z.infer<typeof ResolvedTeacherSchema>;

export const SampleRftShardInputSchema = z.object({
  ...common,
  rftSamples: ArtifactRefSchema,
  plan: RftPlanSchema,
  teacher: ResolvedTeacherSchema,
  rft: RftConfigSchema,
  training: ResolvedTrainingConfigSchema,
  shardIndex: z.number().int().min(0),
});
export type SampleRftShardInput = z.input<typeof SampleRftShardInputSchema>;

export const SampleRftShardOutputSchema = z.object({
  shard: ArtifactRefSchema,
  cached: z.boolean(),
  sampled: z.number().int(),
  kept: z.number().int(),
  /** Rollouts found finished in the shard's log (an earlier attempt's), not asked again. */
  resumed: z.number().int(),
});
export type SampleRftShardOutput = z.infer<typeof SampleRftShardOutputSchema>;

export const CollectRftInputSchema = z.object({ ...common, shards: z.array(ArtifactRefSchema) });
export type CollectRftInput = z.input<typeof CollectRftInputSchema>;
export const CollectRftOutputSchema = z.object({
  sampled: ArtifactRefSchema,
  /** trainer.sft's examples_path: one kept trajectory per line. */
  examplesPath: z.string(),
  total: z.number().int(),
  kept: z.number().int(),
  failed: z.number().int(),
});
export type CollectRftOutput = z.infer<typeof CollectRftOutputSchema>;

export const FineTuneRftInputSchema = z.object({
  ...common,
  examplesPath: z.string(),
  /** The sampled artifact the examples come from: the fine-tune's cache key. */
  sampled: ArtifactRefSchema,
  sft: RftSftSchema,
  modelDir: z.string(),
  python: z.string(),
  recipe: z.string(),
});
export type FineTuneRftInput = z.input<typeof FineTuneRftInputSchema>;
export const FineTuneRftOutputSchema = z.object({
  checkpoint: z.string(),
  steps: z.number().int(),
  metrics: ArtifactRefSchema,
  tokensPath: z.string(),
  cached: z.boolean(),
  attempts: z.number().int(),
});
export type FineTuneRftOutput = z.infer<typeof FineTuneRftOutputSchema>;
export const FineTuneHeartbeatSchema = z.object({ step: z.number().int(), checkpointStep: z.number().int().nullable() });

export const WriteRftTrajectoriesInputSchema = z.object({ ...common, sampled: ArtifactRefSchema, tokensPath: z.string() });
export type WriteRftTrajectoriesInput = z.input<typeof WriteRftTrajectoriesInputSchema>;

export const RftResultSchema = z.object({
  trajectories: ArtifactRefSchema,
  trainingSamples: ArtifactRefSchema,
  checkpoint: z.string(),
  sftSteps: z.number().int(),
  sampled: z.number().int(),
  kept: z.number().int(),
  failed: z.number().int(),
  teacher: z.string(),
});
export type RftResult = z.infer<typeof RftResultSchema>;
