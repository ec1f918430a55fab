import { z } from 'zod';

/** The trainer's stdout (trainer/README.md "Output"): one JSON object per line, each with an `event`. */

const positiveInt = z.number().int().min(1);
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
  /**
   * Optimizer steps taken by the weights that sampled the step's rollouts, and how many steps older than the
   * updated weights they are (`step − 1 − policy_version`: 0 in sync mode, at most `max_staleness` in async;
   * CodeScout §3.4). Absent from the lines of trainers older than async mode.
   */
  policy_version: z.number().int().min(0).nullable().optional(),
  staleness: z.number().int().min(0).nullable().optional(),
  checkpoint: z.string().nullable().default(null),
});
export type TrainerStepLine = z.infer<typeof TrainerStepLineSchema>;

export const TrainerEventSchema = z.discriminatedUnion('event', [
  TrainerStepLineSchema,
  z
    .object({
      event: z.literal('start'),
      step: z.number().int().min(0),
      total_steps: positiveInt,
      device: z.string(),
      generator: z.string(),
      generator_reason: z.string().optional(),
      world_size: z.number().int().min(1).optional(),
      parameters: z.number().int(),
      trainable_parameters: z.number().int(),
      instances: z.number().int(),
    })
    .passthrough(),
  z.object({ event: z.literal('resumed'), step: z.number().int().min(0), checkpoint: z.string() }).passthrough(),
  z.object({ event: z.literal('checkpoint'), step: z.number().int().min(0), path: z.string() }).passthrough(),
  z.object({ event: z.literal('stopped'), step: z.number().int().min(0), checkpoint: z.string().nullable() }).passthrough(),
  z.object({ event: z.literal('done'), step: z.number().int().min(0) }).passthrough(),
]);
export type TrainerEvent = z.infer<typeof TrainerEventSchema>;
