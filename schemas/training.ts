import * as arrow from 'apache-arrow';
import { z } from 'zod';
import { ArtifactRefSchema } from './artifact-ref';
import { SegmentStoreSchema, StoreUriSchema } from './store'; // store (issue #13)

/**
 * The training stage (SPEC §5 "Training"; CodeGrep §3.6, App. A.4; CodeScout §3.4): the `training` section of
 * the run config, the trainer's JSON step lines (trainer/README.md "Output"), the training metrics Parquet,
 * and the messages between the training workflow, its segment activity and its users. Pure zod and
 * apache-arrow: safe to import (as types) from workflow code.
 *
 * Paper parameters are NOT defaulted here: a field left out is not passed to the trainer, which takes it from
 * the recipe's preset (lib/recipes/presets.json, each value with its paper section; `recipe` below picks the
 * preset) or from its config.py. The agent limits default in lib/agent/limits.ts.
 */

/** CodeGrep's three reward iterations (§3.5, Table 1) and CodeScout's reward (§3.3). */
export const TrainingRecipeSchema = z.enum(['v1', 'v2', 'v3', 'codescout']);
export type TrainingRecipe = z.infer<typeof TrainingRecipeSchema>;

/** GRPO (CodeGrep §3.6), GSPO (CodeScout §3.4), Dr.GRPO (CodeScout App. E). */
export const TrainingAlgorithmSchema = z.enum(['grpo', 'gspo', 'drgrpo']);
export type TrainingAlgorithm = z.infer<typeof TrainingAlgorithmSchema>;

/** Keys of trainer/config.py the training activity sets itself; `trainer` may not override them. */
export const TRAINER_KEYS_SET_BY_ACTIVITY = ['model_path', 'output_dir', 'env_url', 'data', 'total_steps'] as const;

const positiveInt = z.number().int().min(1);

export const TrainingLimitsSchema = z
  .object({
    /** Turns per rollout, the answer turn included (lib/agent default: 4 = 3 exploration + 1 answer). */
    maxTurns: positiveInt.optional(),
    /** Tool calls run per turn (lib/agent default: 8). */
    maxToolCallsPerTurn: positiveInt.optional(),
    /** Generated tokens per rollout over all turns (trainer `max_new_tokens`). */
    maxNewTokens: positiveInt.optional(),
    /** Generated tokens per turn (trainer `max_new_tokens_per_turn`). */
    maxNewTokensPerTurn: positiveInt.optional(),
    /** Context limit of a rollout (trainer `max_seq_len`). */
    maxSeqLen: positiveInt.optional(),
  })
  .strict();
export type TrainingLimits = z.infer<typeof TrainingLimitsSchema>;

const TrainingConfigObject = z
  .object({
    /** A local Hugging Face model directory (`from_pretrained(dir)`); training nodes have no hub access. */
    modelDir: z.string().min(1),
    recipe: TrainingRecipeSchema.default('v3'),
    /** Default: the recipe's (lib/recipes/presets.json: GRPO for v1/v2/v3, GSPO for codescout). */
    algorithm: TrainingAlgorithmSchema.optional(),
    /** The step budget; `codegrep training budget <runId> --steps N` changes it while the run goes on. */
    steps: positiveInt,
    /** Steps per training activity (one trainer process): the unit of heartbeats, metrics files and restarts. */
    segmentSteps: positiveInt.default(50),
    checkpointEvery: positiveInt.optional(),
    keepCheckpoints: positiveInt.optional(),
    /** Prompts per step (trainer `batch_size`). */
    batchSize: positiveInt.optional(),
    /** Rollouts per prompt: the GRPO group (trainer `group_size`). */
    groupSize: z.number().int().min(2).optional(),
    limits: TrainingLimitsSchema.default({}),
    lr: z.number().positive().optional(),
    warmupRatio: z.number().min(0).lt(1).optional(),
    temperature: z.number().positive().optional(),
    topP: z.number().gt(0).max(1).optional(),
    topK: positiveInt.optional(),
    klBeta: z.number().min(0).optional(),
    lora: z.object({ r: positiveInt.optional(), alpha: z.number().positive().optional(), dropout: z.number().min(0).lt(1).optional() }).strict().optional(),
    /** Seed of the data order and sampling; a resume must use the same one. */
    seed: z.number().int().min(0).default(0),
    /** Mask the loss of rollouts that use every turn without answering; default: the recipe's (lib/recipes/presets.json). */
    maskUnansweredAtTurnLimit: z.boolean().optional(),
    /** CodeScout's auxiliary +1 for ending in exactly maxTurns turns (CodeScout-14B). */
    codescoutTurnBonus: z.boolean().default(false),
    /** Any other trainer/config.py key, passed as is (generator, dtype, micro_batch_tokens, vllm, chat_template_kwargs, …). */
    trainer: z.record(z.string(), z.unknown()).default({}),
    /**
     * Trainer processes per segment, one per GPU of the GPU worker's node. Above 1 the segment runs
     * `python -m torch.distributed.run --standalone --nproc-per-node <gpus> -m trainer.train` (trainer/distributed.py:
     * rollouts sharded by rank, one optimizer step per training step; on a CPU node, gloo processes).
     */
    gpus: positiveInt.default(1),
    /** The trainer's Python (the venv made by scripts/setup-python.sh). */
    python: z.string().min(1).default('.venv/bin/python'),
    /** Task queue of the GPU worker; default temporal.config.ts `taskQueues.gpu`. */
    gpuTaskQueue: z.string().min(1).optional(),
    /** How long a stopped trainer may take to checkpoint and exit before it is killed. */
    stopGraceMs: positiveInt.default(300_000),
    /** Least time between two progress signals of the training activity (signals land in history). */
    progressEveryMs: positiveInt.default(5_000),
    /** Continue-as-new after this many segments even when Temporal does not suggest it yet. */
    maxSegmentsPerRun: positiveInt.optional(),
    /** A plumbing check (e.g. a tiny random model on CPU): the report says its numbers mean nothing. */
    smokeRun: z.boolean().default(false),
  })
  .strict();

function refuseActivityKeys(training: { trainer: Record<string, unknown> }, ctx: z.RefinementCtx): void {
  for (const key of TRAINER_KEYS_SET_BY_ACTIVITY) {
    if (key in training.trainer) {
      ctx.addIssue({ code: 'custom', path: ['trainer', key], message: `is set by the training activity; use the training section's own fields` });
    }
  }
}

export const TrainingConfigSchema = TrainingConfigObject.superRefine(refuseActivityKeys);
export type TrainingConfig = z.infer<typeof TrainingConfigSchema>;
export type TrainingConfigInput = z.input<typeof TrainingConfigSchema>;

/** The training section after validate-config: absolute paths, the GPU task queue filled in. */
export const ResolvedTrainingConfigSchema = TrainingConfigObject.extend({ gpuTaskQueue: z.string().min(1) }).superRefine(refuseActivityKeys);
export type ResolvedTrainingConfig = z.infer<typeof ResolvedTrainingConfigSchema>;

// ---------------------------------------------------------------------------------------------------------
// The trainer's stdout (trainer/README.md "Output"): one JSON object per line, each with an `event`.

const finite = z.number().finite();

/** A `step` line. Fields the trainer may leave out (GPU-only memory) are optional. */
export const TrainerStepLineSchema = z.object({
  event: z.literal('step'),
  step: positiveInt,
  epoch: z.number().int().min(0),
  reward_mean: finite,
  reward_std: finite,
  reward_components: z.record(z.string(), finite).default({}),
  /** null: not computed (β = 0 and track_kl off: no reference forward). */
  kl: finite.nullable(),
  loss: finite,
  clip_ratio: finite,
  grad_norm: finite,
  lr: finite,
  turns_mean: finite,
  tool_calls_per_turn_mean: finite,
  advantage_scale_mean: finite,
  answered_ratio: finite,
  hit_turn_limit_ratio: finite,
  masked_ratio: finite,
  completion_len_mean: finite,
  truncated_ratio: finite,
  step_time_s: finite,
  rollout_time_s: finite,
  update_time_s: finite,
  rollout_tokens: z.number().int().min(0),
  train_tokens: z.number().int().min(0),
  rollout_tokens_per_s: finite,
  train_tokens_per_s: finite,
  peak_gpu_mem_gb: finite.optional(),
  /** Mean |log π_sampler − log π_train| per trained token (null: the sampler reported no log-probs). */
  sampler_logprob_diff: finite.nullable().optional(),
  /** Mean truncated importance-sampling weight (null: the correction is off). */
  is_weight_mean: finite.nullable().optional(),
  checkpoint: z.string().nullable().default(null),
});
export type TrainerStepLine = z.infer<typeof TrainerStepLineSchema>;

export const TrainerEventSchema = z.discriminatedUnion('event', [
  TrainerStepLineSchema,
  z.object({ event: z.literal('start'), step: z.number().int().min(0), total_steps: positiveInt, device: z.string(), generator: z.string(), generator_reason: z.string().optional(), world_size: z.number().int().min(1).optional(), parameters: z.number().int(), trainable_parameters: z.number().int(), instances: z.number().int() }).passthrough(),
  z.object({ event: z.literal('resumed'), step: z.number().int().min(0), checkpoint: z.string() }).passthrough(),
  z.object({ event: z.literal('checkpoint'), step: z.number().int().min(0), path: z.string() }).passthrough(),
  z.object({ event: z.literal('stopped'), step: z.number().int().min(0), checkpoint: z.string().nullable() }).passthrough(),
  z.object({ event: z.literal('done'), step: z.number().int().min(0) }).passthrough(),
]);
export type TrainerEvent = z.infer<typeof TrainerEventSchema>;

// ---------------------------------------------------------------------------------------------------------
// Training metrics: one row per step (`training/metrics/segment-<k>.parquet`, merged into `training/metrics.parquet`).

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

/** The trainer's snake_case step line as a metrics row. */
export function stepLineToMetricsRow(line: TrainerStepLine, where: { segment: number; attempt: number; line: number }): TrainingMetricsRow {
  return {
    step: line.step,
    epoch: line.epoch,
    rewardMean: line.reward_mean,
    rewardStd: line.reward_std,
    rewardComponents: Object.entries(line.reward_components)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([name, value]) => ({ name, value })),
    kl: line.kl ?? Number.NaN,
    loss: line.loss,
    clipRatio: line.clip_ratio,
    gradNorm: line.grad_norm,
    lr: line.lr,
    turnsMean: line.turns_mean,
    toolCallsPerTurnMean: line.tool_calls_per_turn_mean,
    advantageScaleMean: line.advantage_scale_mean,
    answeredRatio: line.answered_ratio,
    hitTurnLimitRatio: line.hit_turn_limit_ratio,
    maskedRatio: line.masked_ratio,
    completionLenMean: line.completion_len_mean,
    truncatedRatio: line.truncated_ratio,
    stepTimeS: line.step_time_s,
    rolloutTimeS: line.rollout_time_s,
    updateTimeS: line.update_time_s,
    rolloutTokens: line.rollout_tokens,
    trainTokens: line.train_tokens,
    rolloutTokensPerS: line.rollout_tokens_per_s,
    trainTokensPerS: line.train_tokens_per_s,
    peakGpuMemGb: line.peak_gpu_mem_gb ?? null,
    checkpoint: line.checkpoint,
    ...where,
  };
}

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

export function latestStepMetrics(row: TrainingMetricsRow): LatestStepMetrics {
  return {
    step: row.step,
    rewardMean: row.rewardMean,
    kl: Number.isFinite(row.kl) ? row.kl : null,
    turnsMean: row.turnsMean,
    completionLenMean: row.completionLenMean,
    toolCallsPerTurnMean: row.toolCallsPerTurnMean,
    stepTimeS: row.stepTimeS,
  };
}

// ---------------------------------------------------------------------------------------------------------
// The segment activity

/**
 * Heartbeat details of the segment activity: a retry resumes from the newest checkpoint and logs these.
 * `signalled` is the newest step and checkpoint step sent to the workflow as `trainingProgress` in any
 * attempt of this segment: a retry sends only what is newer, which bounds the workflow's history (see
 * workflows/training.ts).
 */
export const TrainingHeartbeatSchema = z.object({
  step: z.number().int().min(0),
  checkpoint: z.string().nullable(),
  signalled: z.object({ step: z.number().int().min(0), checkpointStep: z.number().int().min(0) }).default({ step: 0, checkpointStep: 0 }),
});
export type TrainingHeartbeat = z.infer<typeof TrainingHeartbeatSchema>;

export const TrainSegmentInputSchema = z.object({
  runId: z.string(),
  runDir: z.string(),
  /** The training workflow, which takes `trainingProgress` signals. */
  trainingWorkflowId: z.string().nullable().default(null),
  samples: ArtifactRefSchema,
  training: ResolvedTrainingConfigSchema,
  /** 1-based segment number; names the segment's files. */
  segment: positiveInt,
  /** The step the workflow last confirmed; the segment's metrics hold steps above it. */
  fromStep: z.number().int().min(0),
  /** Stop (at a checkpoint) once this step is done. */
  targetStep: positiveInt,
  /** The budget: the trainer's total_steps, which shapes the lr schedule. */
  totalSteps: positiveInt,
  // store (issue #13): set, the segment runs shared-nothing (node-local run dir and worktrees, state via the store)
  store: SegmentStoreSchema.nullable().default(null),
});
export type TrainSegmentInput = z.input<typeof TrainSegmentInputSchema>;

export const SegmentStopSchema = z.enum(['target', 'budget', 'cancelled', 'signal', 'already-done']);

export const TrainSegmentResultSchema = z.object({
  segment: z.number().int(),
  /** The step of the newest checkpoint when the trainer exited: where the next segment resumes. */
  step: z.number().int().min(0),
  checkpoint: z.string().nullable(),
  stoppedBy: SegmentStopSchema,
  /** The step the trainer resumed from (0 for a fresh start). */
  resumedFrom: z.number().int().min(0),
  attempt: z.number().int(),
  metrics: ArtifactRefSchema,
  latest: LatestStepMetricsSchema.nullable(),
  instances: z.number().int(),
  skippedSamples: z.number().int(),
  trainerParameters: z.number().int().nullable(),
  device: z.string().nullable(),
  wallSeconds: z.number(),
});
export type TrainSegmentResult = z.infer<typeof TrainSegmentResultSchema>;

/** Sent by the segment activity to the training workflow after steps and checkpoints (throttled). */
export interface TrainingProgress {
  segment: number;
  step: number;
  checkpointStep: number | null;
  latest: LatestStepMetrics | null;
}

// ---------------------------------------------------------------------------------------------------------
// The workflow

export interface TrainingStatus {
  runId: string;
  /** Newest step done (reported by the running segment, confirmed by each segment's end). */
  step: number;
  budget: number;
  checkpointStep: number | null;
  checkpoint: string | null;
  segment: number;
  state: 'training' | 'paused' | 'stopping' | 'reporting' | 'done';
  /** Whether a segment activity (a trainer) is running now. */
  segmentRunning: boolean;
  paused: boolean;
  stopRequested: boolean;
  latest: LatestStepMetrics | null;
  recipe: TrainingRecipe;
  algorithm: TrainingAlgorithm;
  smokeRun: boolean;
  /** Things a user should know (a clamped budget, a checkpoint past the budget, …). */
  notes: string[];
}

/** What a training workflow hands to its continuation. */
export interface TrainingCarry {
  step: number;
  budget: number;
  checkpointStep: number | null;
  checkpoint: string | null;
  segment: number;
  paused: boolean;
  stopRequested: boolean;
  latest: LatestStepMetrics | null;
  notes: string[];
  runs: number;
}

export const TrainingReportInputSchema = z.object({
  runId: z.string(),
  runDir: z.string(),
  /** The last step of the run (its newest checkpoint): metrics above it are off the lineage. */
  step: z.number().int().min(0),
  recipe: TrainingRecipeSchema,
  algorithm: TrainingAlgorithmSchema,
  budget: z.number().int(),
  stoppedEarly: z.boolean(),
  smokeRun: z.boolean(),
  modelDir: z.string(),
  notes: z.array(z.string()).default([]),
  // store (issue #13): set, the segments' logs and metrics are read from the store
  store: StoreUriSchema.optional(),
});
export type TrainingReportInput = z.input<typeof TrainingReportInputSchema>;

export const TrainingReportOutputSchema = z.object({
  metrics: ArtifactRefSchema,
  steps: z.number().int(),
  firstStep: z.number().int().nullable(),
  lastStep: z.number().int().nullable(),
  /** Steps between the first and last with no row (a gap would mean lost metrics). */
  missingSteps: z.array(z.number().int()),
  html: z.string(),
  markdown: z.string(),
  plots: z.array(z.string()),
  smokeRun: z.boolean(),
});
export type TrainingReportOutput = z.infer<typeof TrainingReportOutputSchema>;

export interface TrainingResult {
  runId: string;
  step: number;
  budget: number;
  stoppedEarly: boolean;
  checkpoint: string | null;
  /** Number of the last segment (segments of earlier workflows on the same run directory count too). */
  segments: number;
  report: TrainingReportOutput;
  notes: string[];
}
