import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import type { z } from 'zod';
import { InputFileError, sha256File } from '../../artifacts';
import { readPredictionsFile } from '../../retrievers/predictions-file';
import type { ArtifactRef } from '../../../schemas/artifact-ref';
import type { DownstreamConfiguration } from '../../../schemas/downstream/config';
import type { PlannedConfiguration } from '../../../schemas/downstream/plan';
import { PredictionsParquetRowSchema } from '../../../schemas/downstream/predictions-row';
import { validRows } from './valid-rows';

export interface LoadedPredictions {
  from: NonNullable<PlannedConfiguration['predictionsFrom']>;
  /** The retriever's files per instance id, best first. */
  files: Map<string, string[]>;
  /** Unusable rows or lines, described. */
  errors: string[];
}

/**
 * A predictions configuration's files per instance, from the evaluation stage's Parquet (`artifact`, when the
 * pipeline passes one) or the configured file (that Parquet, or an outside system's JSONL). `where` is the
 * config key (`downstream.configurations.<i>`) every error names. Problems a retry cannot fix throw InputFileError.
 */
export async function loadPredictions(
  configuration: DownstreamConfiguration,
  where: string,
  artifact: ArtifactRef | undefined,
): Promise<LoadedPredictions> {
  const file = artifact?.uri ?? configuration.predictions;
  if (file === undefined) {
    throw new InputFileError(
      `${where}.predictions`,
      `${where} (${configuration.name}) has source "predictions" but no predictions file: set ${where}.predictions to a predictions JSONL or the evaluation stage's predictions Parquet, or run the evaluation stage in the same pipeline`,
    );
  }
  if (!existsSync(file) || !statSync(file).isFile()) {
    throw new InputFileError(
      file,
      `${where}.predictions (${configuration.name}): file ${file} does not exist${artifact ? ' (artifact of an earlier stage)' : ''}`,
    );
  }
  const sha256 = await sha256File(file);
  if (path.extname(file).toLowerCase() === '.parquet') return readParquetPredictions(file, sha256, configuration, where);
  if (configuration.retriever !== undefined) {
    throw new InputFileError(
      file,
      `${where}.retriever (${configuration.name}): only a predictions Parquet file has retrievers; ${file} is read as JSONL`,
    );
  }
  let read;
  try {
    read = await readPredictionsFile(file);
  } catch (error) {
    throw new InputFileError(
      file,
      `${where}.predictions (${configuration.name}): ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  const files = new Map<string, string[]>();
  for (const prediction of read.predictions) files.set(prediction.instanceId, prediction.files);
  const errors = read.errors.map((error) => `line ${error.line}: ${error.message}`);
  return { from: { uri: file, sha256, format: 'jsonl', retriever: null, policy: null }, files, errors };
}

/**
 * The evaluation stage's Parquet holds every retriever: a configuration picks its own by `retriever`, or by being
 * named like one of them; a file of one retriever needs neither.
 */
async function readParquetPredictions(
  file: string,
  sha256: string,
  configuration: DownstreamConfiguration,
  where: string,
): Promise<LoadedPredictions> {
  const files = new Map<string, string[]>();
  const errors: string[] = [];
  const retrievers = new Set<string>();
  const rows: Array<{ ordinal: number } & ReturnType<typeof PredictionsParquetRowSchema.parse>> = [];
  const invalidRow = (ordinal: number, _row: unknown, error: z.ZodError) =>
    `row ${ordinal}: ${error.issues.map((i) => i.message).join('; ')}`;
  for await (const { ordinal, row } of validRows(file, PredictionsParquetRowSchema, errors, invalidRow)) {
    if (row.retriever !== null) retrievers.add(row.retriever);
    rows.push({ ordinal, ...row });
  }
  const retriever = configuration.retriever ?? (retrievers.size > 1 && retrievers.has(configuration.name) ? configuration.name : undefined);
  if (retriever === undefined && retrievers.size > 1) {
    throw new InputFileError(
      file,
      `${where}.predictions (${configuration.name}): ${file} holds ${retrievers.size} retrievers (${[...retrievers].sort().join(', ')}); set ${where}.retriever to one of them, or name the configuration like it`,
    );
  }
  if (retriever !== undefined && !retrievers.has(retriever)) {
    throw new InputFileError(
      file,
      `${where}.retriever (${configuration.name}): ${file} has no rows of retriever "${retriever}" (it has ${[...retrievers].sort().join(', ') || 'none'})`,
    );
  }
  let policy: LoadedPredictions['from']['policy'] = null;
  for (const row of rows) {
    if (retriever !== undefined && row.retriever !== retriever) continue;
    if (row.policy) {
      if (policy && policy.adapterSha256 !== row.policy.adapterSha256)
        errors.push(`row ${row.ordinal}: checkpoint ${row.policy.model} differs from ${policy.model} of the earlier rows`);
      policy ??= row.policy;
    }
    if (files.has(row.instanceId)) errors.push(`row ${row.ordinal}: instance ${row.instanceId} again; the first row is used`);
    else files.set(row.instanceId, row.files);
  }
  const used = retriever ?? (retrievers.size === 1 ? [...retrievers][0]! : null);
  return { from: { uri: file, sha256, format: 'parquet', retriever: used, policy }, files, errors };
}
