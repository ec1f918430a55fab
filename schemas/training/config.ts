import { z } from 'zod';
import { SandboxConfigSchema } from '../sandbox';
import { flagRepeatedInstances } from '../unique-instances';

/**
 * The `training` section of the run config (docs/design.md "Training"; CodeGrep §3.6, App. A.4; CodeScout §3.4).
 * Pure zod: safe to import (as types) from workflow code.
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

/** The papers' per-model-size setups (lib/recipes/presets.json `setups`; CodeScout §4.1). */
export const PAPER_SETUPS = ['codescout-1.7b', 'codescout-4b', 'codescout-14b'] as const;
export const PaperSetupSchema = z.enum(PAPER_SETUPS, {
  error: (issue) => `unknown paper setup ${JSON.stringify(issue.input)}; expected one of ${PAPER_SETUPS.join(', ')}`,
});
export type PaperSetup = z.infer<typeof PaperSetupSchema>;

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

/**
 * Validation during training: every `every` steps the newest checkpoint is served (lib/policy-server) and
 * evaluated on the held-out `instances` as a child evaluation workflow; `metric` of its summary is recorded per
 * checkpoint (`training/validation.parquet`, the training report), `checkpoint: best` is the highest, and with
 * `patience` training stops after that many validations without a new best. The held-out instances are taken
 * out of the training samples, and no training sample may share a repository commit with one of them.
 */
export const ValidationMetricSchema = z.enum(['fBetaMean', 'fileF1', 'moduleF1', 'functionF1']);
export type ValidationMetric = z.infer<typeof ValidationMetricSchema>;
export const TrainingValidationSchema = z
  .object({
    instances: z.array(z.string().min(1)).min(1, 'validation.instances: list the held-out instance ids'),
    every: positiveInt,
    metric: ValidationMetricSchema.default('fBetaMean'),
    patience: positiveInt.optional(),
  })
  .strict()
  .superRefine((validation, ctx) => flagRepeatedInstances(validation.instances, ctx));
export type TrainingValidation = z.infer<typeof TrainingValidationSchema>;

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
    lora: z
      .object({ r: positiveInt.optional(), alpha: z.number().positive().optional(), dropout: z.number().min(0).lt(1).optional() })
      .strict()
      .optional(),
    /**
     * "async": CodeScout §3.4 (SkyRL's asynchronous training): a step may learn from rollouts sampled by the
     * policy up to `maxStaleness` steps older, importance-corrected and clipped. Default: the trainer's "sync".
     */
    mode: z.enum(['sync', 'async']).optional(),
    /** How many steps old an async rollout's policy may be (trainer default 4, CodeScout §3.4); only with `mode: async`. */
    maxStaleness: z.number().int().min(1, 'maxStaleness must be at least 1').optional(),
    /** A paper's setup for one model size: batch × group, turns, context, full fine-tuning (CodeScout §4.1). */
    paperSetup: PaperSetupSchema.optional(),
    /** "lora" (the trainer's default; CodeGrep App. A.4) or "full" (every weight; CodeScout §4.1). */
    finetune: z.enum(['lora', 'full']).optional(),
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
    /**
     * Filled in by validate-config from the run config's top-level `sandbox` (schemas/sandbox.ts); set that one.
     * Accepted here because the pipeline hands each stage its resolved config, which is validated again.
     */
    sandbox: SandboxConfigSchema.optional(),
    /** How long a stopped trainer may take to checkpoint and exit before it is killed. */
    stopGraceMs: positiveInt.default(300_000),
    /** Least time between two progress signals of the training activity (signals land in history). */
    progressEveryMs: positiveInt.default(5_000),
    /** Continue-as-new after this many segments even when Temporal does not suggest it yet. */
    maxSegmentsPerRun: positiveInt.optional(),
    /** A plumbing check (e.g. a tiny random model on CPU): the report says its numbers mean nothing. */
    smokeRun: z.boolean().default(false),
    /** Held-out evaluation of the newest checkpoint every `every` steps (see TrainingValidationSchema). */
    validation: TrainingValidationSchema.optional(),
  })
  .strict();

/** trainer/config.py's `checkpoint_every` default: the step interval when the section sets none. */
const TRAINER_CHECKPOINT_EVERY = 10;

function checkTrainingSection(
  training: {
    trainer: Record<string, unknown>;
    validation?: { every: number } | undefined;
    checkpointEvery?: number | undefined;
    mode?: 'sync' | 'async' | undefined;
    maxStaleness?: number | undefined;
    paperSetup?: PaperSetup | undefined;
    recipe: TrainingRecipe;
    gpus: number;
  },
  ctx: z.RefinementCtx,
): void {
  // The paper setups train asynchronously (CodeScout §3.4), and async mode runs one trainer process
  // (trainer/README.md "Paper setups"): refused here, before a GPU segment starts, rather than by the trainer.
  const async = training.mode === 'async' || (training.paperSetup !== undefined && training.mode !== 'sync');
  if (async && training.gpus > 1)
    ctx.addIssue({
      code: 'custom',
      path: ['gpus'],
      message: `async training (${training.mode === 'async' ? 'mode: async' : `paperSetup ${training.paperSetup}`}) runs one trainer process; set gpus: 1${training.mode === 'async' ? '' : ' or mode: sync'}`,
    });
  // The environment scores with the section's recipe and the trainer with the setup's: they must be the same one.
  if (training.paperSetup !== undefined && training.recipe !== 'codescout')
    ctx.addIssue({
      code: 'custom',
      path: ['recipe'],
      message: `paperSetup ${training.paperSetup} trains with the codescout recipe (CodeScout §4.1); set recipe: codescout (got ${training.recipe})`,
    });
  if (training.maxStaleness !== undefined && !async)
    ctx.addIssue({
      code: 'custom',
      path: ['maxStaleness'],
      message: `only applies with mode: async (mode is ${training.mode ?? 'sync, the default'}); set mode: async or drop maxStaleness`,
    });
  if (training.validation) {
    const interval = training.checkpointEvery ?? TRAINER_CHECKPOINT_EVERY;
    if (training.validation.every % interval !== 0)
      ctx.addIssue({
        code: 'custom',
        path: ['validation', 'every'],
        message: `must be a multiple of checkpointEvery (${interval}${training.checkpointEvery === undefined ? ', the trainer default' : ''}), so every validated step has a checkpoint`,
      });
  }
  for (const key of TRAINER_KEYS_SET_BY_ACTIVITY) {
    if (key in training.trainer) {
      ctx.addIssue({
        code: 'custom',
        path: ['trainer', key],
        message: `is set by the training activity; use the training section's own fields`,
      });
    }
  }
}

export const TrainingConfigSchema = TrainingConfigObject.superRefine(checkTrainingSection);
export type TrainingConfig = z.infer<typeof TrainingConfigSchema>;
export type TrainingConfigInput = z.input<typeof TrainingConfigSchema>;

/** The training section after validate-config: absolute paths, the GPU task queue filled in. */
export const ResolvedTrainingConfigSchema = TrainingConfigObject.extend({
  gpuTaskQueue: z.string().min(1),
  /** The run config's top-level `sandbox`, for the environment's tools (schemas/sandbox.ts). */
  sandbox: SandboxConfigSchema.prefault({}),
}).superRefine(checkTrainingSection);
export type ResolvedTrainingConfig = z.infer<typeof ResolvedTrainingConfigSchema>;
