import { z } from 'zod';
import { ValidationRowSchema } from './validation';
import { ArtifactRefSchema } from '../artifact-ref';
import { SegmentStoreSchema, StoreUriSchema } from '../store';
import { ResolvedTrainingConfigSchema, TrainingAlgorithmSchema, TrainingRecipeSchema } from './config';
import { LatestStepMetricsSchema } from './metrics';

/** The training activities' inputs, results and heartbeat details, and the progress signal to the workflow. */

const positiveInt = z.number().int().min(1);

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
  /** Set, the segment runs shared-nothing: a node-local run dir and worktrees, state through the store (README "Deployment: several machines"). */
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
export type { TrainingProgress } from './messages';

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
  /** Set, the segments' logs and metrics are read from the run store (README "Deployment: several machines"). */
  store: StoreUriSchema.optional(),
  /** The validated checkpoints (training.validation), in step order. */
  validation: z.array(ValidationRowSchema).default([]),
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

/** The report input after parsing (defaults filled in). */
export type TrainingReportRequest = z.output<typeof TrainingReportInputSchema>;
