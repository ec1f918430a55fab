import { writeValidationRecords } from '../lib/training/validation';
import type { ArtifactRef } from '../schemas/artifact-ref';
import { RecordValidationInputSchema, type RecordValidationInput } from '../schemas/training/validation';

/** Every validated checkpoint so far, to `training/validation.parquet`. */
export async function recordValidation(rawInput: RecordValidationInput): Promise<ArtifactRef> {
  const input = RecordValidationInputSchema.parse(rawInput);
  return writeValidationRecords(input.runDir, input.rows);
}
