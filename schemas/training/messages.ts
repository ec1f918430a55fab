import { z } from 'zod';
import { TrainingAlgorithmSchema, TrainingRecipeSchema } from './config';
import { LatestStepMetricsSchema } from './metrics';

/**
 * The messages of the training workflow (workflows/training.ts): their registered names and payloads. The
 * workflow defines its signals, query and update from these names; the segment activity, the CLI and tests send
 * and ask by the same constants. A name is part of every recorded history: never rename one.
 */
export const TRAINING_MESSAGES = {
  /** Signal: stop the running segment at a checkpoint and wait for `resume`. */
  pause: 'pause',
  /** Signal: go on after `pause`. */
  resume: 'resume',
  /** Signal: stop the running segment at a checkpoint, then write the report and finish. */
  stopAfterCheckpoint: 'stopAfterCheckpoint',
  /** Signal from the segment activity: the newest step and checkpoint (throttled, lib/training ProgressThrottle). */
  trainingProgress: 'trainingProgress',
  /** Update: change the step budget; refused below the current step. Returns the status after the change. */
  setStepBudget: 'setStepBudget',
  /** Query: the run's status. */
  trainingStatus: 'trainingStatus',
} as const;

/** The `trainingProgress` signal's payload. */
export const TrainingProgressSchema = z.object({
  segment: z.number().int(),
  step: z.number().int(),
  checkpointStep: z.number().int().nullable(),
  latest: LatestStepMetricsSchema.nullable(),
});
export type TrainingProgress = z.infer<typeof TrainingProgressSchema>;

/** The `setStepBudget` update's argument: the new total number of steps. */
export const StepBudgetSchema = z.number().int().positive();

/** The `trainingStatus` query's answer (and the `setStepBudget` update's). */
export const TrainingStatusSchema = z.object({
  runId: z.string(),
  /** Newest step done (reported by the running segment, confirmed by each segment's end). */
  step: z.number().int(),
  budget: z.number().int(),
  checkpointStep: z.number().int().nullable(),
  checkpoint: z.string().nullable(),
  segment: z.number().int(),
  state: z.enum(['training', 'paused', 'stopping', 'reporting', 'done']),
  /** Whether a segment activity (a trainer) is running now. */
  segmentRunning: z.boolean(),
  paused: z.boolean(),
  stopRequested: z.boolean(),
  latest: LatestStepMetricsSchema.nullable(),
  recipe: TrainingRecipeSchema,
  algorithm: TrainingAlgorithmSchema,
  smokeRun: z.boolean(),
  /** Things a user should know (a clamped budget, a checkpoint past the budget, …). */
  notes: z.array(z.string()),
});
export type TrainingStatus = z.infer<typeof TrainingStatusSchema>;
