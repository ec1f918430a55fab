import { existsSync } from 'node:fs';
import path from 'node:path';
import { findCachedArtifact, hashConfig, readParquetObjects, writeParquetArtifact } from '../artifacts';
import type { ArtifactRef } from '../../schemas/artifact-ref';
import {
  ENVIRONMENT_SAMPLES_SCHEMA_NAME,
  ENVIRONMENT_SAMPLES_SCHEMA_VERSION,
  environmentSamplesArrowSchema,
} from '../../schemas/environment';
import type { TrainingValidation } from '../../schemas/training/config';
import {
  VALIDATION_SCHEMA_NAME,
  VALIDATION_SCHEMA_VERSION,
  ValidationRowSchema,
  validationColumns,
  type ValidationRow,
} from '../../schemas/training/validation';
import { trainingLayout } from './layout';

/**
 * The held-out split of a training run with validation (schemas/training/config.ts TrainingValidationSchema):
 * the held-out samples are taken out of the training samples, and the two must not share a repository commit
 * either (a policy that trained on a commit's tree has seen the files a held-out instance asks about), so an
 * overlapping config is refused by name before any step is trained.
 */

/** The validation split cannot be made: an unknown instance, or a commit shared with the training samples. */
export class ValidationSplitError extends Error {
  override readonly name = 'ValidationSplitError';
}

export function validationFiles(runDir: string) {
  const root = trainingLayout(runDir).root;
  return {
    trainingSamples: path.join(root, 'training-samples.parquet'),
    validationSamples: path.join(root, 'validation-samples.parquet'),
    records: path.join(root, 'validation.parquet'),
  };
}

/** Which samples go where, and what is wrong with the split (empty when nothing is). */
export function splitSamples<T extends { instanceId: string; repo: string; baseCommit: string }>(
  samples: readonly T[],
  heldOut: readonly string[],
): { training: T[]; validation: T[]; problems: string[] } {
  const wanted = new Set(heldOut);
  const validation = samples.filter((s) => wanted.has(s.instanceId));
  const training = samples.filter((s) => !wanted.has(s.instanceId));
  const problems: string[] = [];
  const known = new Set(samples.map((s) => s.instanceId));
  const unknown = heldOut.filter((id) => !known.has(id));
  if (unknown.length > 0) problems.push(`training.validation.instances: ${unknown.join(', ')} are not samples of this run`);
  const heldCommits = new Map(validation.map((s) => [`${s.repo}@${s.baseCommit}`, s.instanceId]));
  const shared = training.filter((s) => heldCommits.has(`${s.repo}@${s.baseCommit}`));
  if (shared.length > 0) {
    problems.push(
      `training.validation.instances share a repository commit with training samples: ${shared
        .slice(0, 5)
        .map(
          (s) =>
            `${s.instanceId} (training) and ${heldCommits.get(`${s.repo}@${s.baseCommit}`)} (held out) are both ${s.repo}@${s.baseCommit.slice(0, 12)}`,
        )
        .join('; ')}${shared.length > 5 ? ` (and ${shared.length - 5} more)` : ''}; hold out every instance of a commit, or none`,
    );
  }
  if (training.length === 0 && problems.length === 0)
    problems.push('training.validation.instances holds out every sample: nothing is left to train on');
  return { training, validation, problems };
}

/** Writes the run's training and held-out samples (a cache hit when the samples and the split are the same). */
export async function writeValidationSplit(
  runDir: string,
  samples: ArtifactRef,
  validation: TrainingValidation,
): Promise<{ training: ArtifactRef; validation: ArtifactRef }> {
  const rows = (await readParquetObjects(samples.uri)) as (Record<string, unknown> & {
    instanceId: string;
    repo: string;
    baseCommit: string;
  })[];
  const split = splitSamples(rows, validation.instances);
  if (split.problems.length > 0) throw new ValidationSplitError(split.problems.join('; '));
  const files = validationFiles(runDir);
  const write = async (file: string, part: 'training' | 'validation') => {
    const expectation = {
      schemaName: ENVIRONMENT_SAMPLES_SCHEMA_NAME,
      schemaVersion: ENVIRONMENT_SAMPLES_SCHEMA_VERSION,
      inputs: [samples],
      configHash: hashConfig({ stage: `validation-split-${part}`, instances: [...validation.instances].sort() }),
    };
    return (
      (await findCachedArtifact(file, expectation)) ??
      writeParquetArtifact({ path: file, arrowSchema: environmentSamplesArrowSchema, rows: split[part], ...expectation })
    );
  };
  return { training: await write(files.trainingSamples, 'training'), validation: await write(files.validationSamples, 'validation') };
}

/** Writes every validated checkpoint so far to `training/validation.parquet`. */
export async function writeValidationRecords(runDir: string, rows: readonly ValidationRow[]): Promise<ArtifactRef> {
  return writeParquetArtifact({
    path: validationFiles(runDir).records,
    schemaName: VALIDATION_SCHEMA_NAME,
    schemaVersion: VALIDATION_SCHEMA_VERSION,
    arrowSchema: validationColumns.arrowSchema(),
    rows: rows.map((r) => ValidationRowSchema.parse(r)),
    inputs: [],
    configHash: hashConfig({ stage: 'training-validation', steps: rows.map((r) => r.step) }),
  });
}

export async function readValidationRecords(runDir: string): Promise<ValidationRow[]> {
  const file = validationFiles(runDir).records;
  if (!existsSync(file)) return [];
  return (await readParquetObjects(file)).map((row) => ValidationRowSchema.parse(row));
}
