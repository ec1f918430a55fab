import { z } from 'zod';
import { ArtifactRefSchema } from '../artifact-ref';
import { columns, float64, int32, nullable, utf8 } from '../columns';
import { TrainingValidationSchema } from './config';

/** The training run's validation (schemas/training/config.ts TrainingValidationSchema): its split and its records. */

export const SplitValidationInputSchema = z.object({
  runDir: z.string(),
  samples: ArtifactRefSchema,
  validation: TrainingValidationSchema,
});
export type SplitValidationInput = z.input<typeof SplitValidationInputSchema>;

export const SplitValidationOutputSchema = z.object({
  /** The samples the trainer trains on: every sample but the held-out ones. */
  training: ArtifactRefSchema,
  /** The held-out samples, with their ground truth, for the validation evaluations. */
  validation: ArtifactRefSchema,
});
export type SplitValidationOutput = z.infer<typeof SplitValidationOutputSchema>;

/** One validated checkpoint: its step, its adapter, the metric and where its evaluation is. */
export const validationColumns = columns({
  step: int32(),
  metric: utf8(),
  value: nullable(float64()),
  instances: int32(),
  failed: int32(),
  adapterSha256: utf8(),
  servedModel: utf8(),
  evaluationDir: utf8(),
});
export const ValidationRowSchema = validationColumns.zod;
export type ValidationRow = z.infer<typeof ValidationRowSchema>;
export const VALIDATION_SCHEMA_NAME = 'training.validation';
export const VALIDATION_SCHEMA_VERSION = 1;

export const RecordValidationInputSchema = z.object({ runDir: z.string(), rows: z.array(ValidationRowSchema) });
export type RecordValidationInput = z.input<typeof RecordValidationInputSchema>;
