import { z } from 'zod';

/**
 * The trainer's JSON config (trainer/config.py `TrainConfig`), as the training activity writes it for each
 * segment (lib/training trainerConfig). The one source of the contract: `trainer/config.schema.json` is
 * generated from it (lib/training/trainer-config-schema.ts) and trainer/config.py validates every config it
 * loads against that file. Keys left out take the recipe preset's value or the trainer's default, so only
 * the keys the activity always sets are required.
 *
 * Shapes and types only, plus the ranges config.py does not check itself; config.py's own checks (ranges,
 * one-of-two data sources, URL form) run first and keep their messages.
 */

const int = z.number().int();
const positiveInt = int.min(1);
const text = z.string().min(1);

const LoraSchema = z
  .object({
    r: positiveInt,
    alpha: int,
    dropout: z.number(),
    /** peft's "all-linear", or the module names. */
    target_modules: z.union([text, z.array(text).min(1)]),
  })
  .partial()
  .strict();

const DataSchema = z
  .object({
    /** Exactly one of `instance_ids` and `path` (checked by config.py). */
    instance_ids: z.array(text).nullable(),
    path: text.nullable(),
    column: text,
  })
  .partial()
  .strict();

const VllmSchema = z
  .object({
    gpu_memory_utilization: z.number(),
    enable_prefix_caching: z.boolean(),
    sleep_mode: z.boolean(),
    tensor_parallel_size: positiveInt,
  })
  .partial()
  .strict();

export const TrainerConfigSchema = z
  .object({
    // Set by the training activity for every segment.
    model_path: text,
    output_dir: text,
    env_url: text,
    data: DataSchema,
    total_steps: positiveInt,
    // The recipe preset and what may override it (lib/recipes/presets.json).
    seed: int.min(0).optional(),
    recipe: text.optional(),
    /** A paper's setup for one model size (lib/recipes/presets.json `setups`, e.g. "codescout-4b"; CodeScout §4.1). */
    paper_setup: text.nullable().optional(),
    /** "lora" (CodeGrep App. A.4) or "full" (every weight; CodeScout §4.1 uses no LoRA). */
    finetune: z.enum(['lora', 'full']).optional(),
    /** A checkpoint directory (e.g. trainer.sft's RFT warm start) whose weights the run starts from, fresh optimizer at step 0. */
    init_from: text.nullable().optional(),
    algorithm: z.enum(['grpo', 'gspo', 'dr_grpo']).optional(),
    max_turns: positiveInt.optional(),
    max_new_tokens: positiveInt.optional(),
    temperature: z.number().optional(),
    top_p: z.number().optional(),
    top_k: int.optional(),
    lr: z.number().optional(),
    lr_schedule: z.enum(['cosine', 'constant']).optional(),
    warmup_ratio: z.number().optional(),
    kl_beta: z.number().optional(),
    clip_low: z.number().optional(),
    clip_high: z.number().optional(),
    normalize_advantage_std: z.boolean().optional(),
    mask_unanswered_at_turn_limit: z.boolean().optional(),
    track_kl: z.boolean().optional(),
    // The trainer's own defaults (trainer/config.py).
    batch_size: positiveInt.optional(),
    group_size: int.min(2).optional(),
    max_new_tokens_per_turn: positiveInt.nullable().optional(),
    max_seq_len: positiveInt.optional(),
    weight_decay: z.number().min(0).optional(),
    max_grad_norm: z.number().optional(),
    mini_batches_per_step: positiveInt.optional(),
    /**
     * "async": CodeScout §3.4 (SkyRL's asynchronous training): a step may learn from rollouts sampled up to
     * `max_staleness` steps earlier (CodeScout: 4), importance-corrected and clipped against the sampling policy
     * (trainer/pipeline.py). "sync" (the trainer's default): on-policy.
     */
    mode: z.enum(['sync', 'async']).optional(),
    max_staleness: positiveInt.optional(),
    importance_sampling_cap: z.number().nullable().optional(),
    lora: LoraSchema.optional(),
    checkpoint_every: positiveInt.optional(),
    keep_checkpoints: positiveInt.optional(),
    micro_batch_tokens: positiveInt.optional(),
    gradient_checkpointing: z.boolean().optional(),
    generator: z.enum(['auto', 'hf', 'vllm']).optional(),
    hf_generation_tokens: positiveInt.nullable().optional(),
    dtype: z.enum(['auto', 'bfloat16', 'float32']).optional(),
    chat_template_kwargs: z.record(z.string(), z.unknown()).optional(),
    chat_template: text.nullable().optional(),
    vllm: VllmSchema.optional(),
    /** Seconds the trainer waits for one environment request. */
    env_timeout_s: z.number().positive().optional(),
  })
  .strict();
export type TrainerConfig = z.infer<typeof TrainerConfigSchema>;
