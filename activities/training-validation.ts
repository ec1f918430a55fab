import * as validation from '../lib/training/validation';
import { SplitValidationInputSchema, type SplitValidationInput, type SplitValidationOutput } from '../schemas/training/validation';
import { configError } from './kit';

/**
 * The training run's held-out split (lib/training/validation): the samples the trainer trains on and the
 * held-out ones, as Parquet artifacts next to the run's training files. An overlapping split fails at once.
 */
export async function splitValidation(rawInput: SplitValidationInput): Promise<SplitValidationOutput> {
  const input = SplitValidationInputSchema.parse(rawInput);
  try {
    return await validation.writeValidationSplit(input.runDir, input.samples, input.validation);
  } catch (error) {
    if (error instanceof validation.ValidationSplitError) throw configError(error.message);
    throw error;
  }
}
