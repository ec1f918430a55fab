import path from 'node:path';
import { ApplicationFailure, log } from '@temporalio/activity';
import { findCachedArtifact, hashConfig, InputFileError, readJsonArtifact, readRows, sourceRef, writeJsonArtifact, writeParquetArtifact } from '../lib/artifacts';
import { judgementKey } from '../lib/labels/judge-run';
import { buildSamples, indexRetainedLabels } from '../lib/labels/samples';
import { ReasoningLengthStats, isRetainedWeight, labelWeight, unnormalizedWeight } from '../lib/labels/weights';
import { WeightInputSchema, WeightSummarySchema, type WeightInput, type WeightOutput, type WeightSummary } from '../schemas/catm';
import { JudgementSchema, keepsFile, type JudgeVerdict } from '../schemas/judge';
import { MinedCandidateSchema, type MinedCandidate } from '../schemas/mining';
import {
  CATM_LABELS_SCHEMA_NAME,
  CATM_LABELS_SCHEMA_VERSION,
  CatmLabelSchema,
  SAMPLES_SCHEMA_NAME,
  SAMPLES_SCHEMA_VERSION,
  catmLabelsArrowSchema,
  samplesArrowSchema,
  type CatmLabel,
} from '../schemas/samples';
import type { ArtifactRef } from '../schemas/artifact-ref';
import { ProgressReporter } from './kit';

const SUMMARY_SCHEMA = { name: 'catm.weight-summary', version: 1 } as const;

async function* artifactRows<T>(uri: string, parse: (row: unknown) => T): AsyncGenerator<T> {
  for await (const record of readRows(uri)) {
    if ('error' in record) throw new Error(`artifact ${uri} row ${record.ordinal}: ${record.error}`);
    yield parse(record.row);
  }
}

/**
 * CATM stage 3 (CodeGrep §3.4, Eq. 1–2): two streaming passes over the judged candidates (β and µraw, then the
 * weights), the labels artifact, and the samples artifact that merges them with the gold patches.
 */
export async function weight(rawInput: WeightInput): Promise<WeightOutput> {
  const input = WeightInputSchema.parse(rawInput);
  const outDir = path.join(input.runDir, 'catm');
  const labelsPath = path.join(outDir, 'labels.parquet');
  const samplesPath = path.join(outDir, 'samples.parquet');
  const summaryPath = path.join(outDir, 'weight-summary.json');
  const instances = await sourceRef(input.instancesPath).catch((error: unknown) => {
    throw ApplicationFailure.create({ type: 'InvalidInput', nonRetryable: true, message: `instances ${input.instancesPath}: ${(error as Error).message}` });
  });
  const configHash = hashConfig({ stage: 'weight' });
  const labelInputs = [input.candidates, input.judgements];
  const sampleInputs = [...labelInputs, instances];

  const cachedLabels = await findCachedArtifact(labelsPath, { schemaName: CATM_LABELS_SCHEMA_NAME, schemaVersion: CATM_LABELS_SCHEMA_VERSION, inputs: labelInputs, configHash });
  const cachedSamples = await findCachedArtifact(samplesPath, { schemaName: SAMPLES_SCHEMA_NAME, schemaVersion: SAMPLES_SCHEMA_VERSION, inputs: sampleInputs, configHash });
  const cachedSummary = await findCachedArtifact(summaryPath, { schemaName: SUMMARY_SCHEMA.name, schemaVersion: SUMMARY_SCHEMA.version, inputs: sampleInputs, configHash });
  if (cachedLabels && cachedSamples && cachedSummary) {
    log.info('weight: cache hit', { samples: cachedSamples.uri });
    return { labels: cachedLabels, samples: cachedSamples, summary: WeightSummarySchema.parse(await readJsonArtifact(cachedSummary.uri)), cached: true };
  }

  const progress = new ProgressReporter();
  try {
    return await weighAndSample(input, progress, { labelsPath, samplesPath, summaryPath, configHash, labelInputs, sampleInputs });
  } finally {
    progress.close();
  }
}

interface WeightPaths {
  labelsPath: string;
  samplesPath: string;
  summaryPath: string;
  configHash: string;
  labelInputs: ArtifactRef[];
  sampleInputs: ArtifactRef[];
}

async function weighAndSample(input: ReturnType<typeof WeightInputSchema.parse>, progress: ProgressReporter, paths: WeightPaths): Promise<WeightOutput> {
  const { labelsPath, samplesPath, summaryPath, configHash, labelInputs, sampleInputs } = paths;
  const verdicts = new Map<string, JudgeVerdict>();
  for await (const judgement of artifactRows(input.judgements.uri, (row) => JudgementSchema.parse(row))) {
    verdicts.set(judgementKey(judgement.trajectoryId, judgement.path), judgement.verdict);
  }
  const kept = async function* (): AsyncGenerator<{ candidate: MinedCandidate; verdict: JudgeVerdict }> {
    for await (const candidate of artifactRows(input.candidates.uri, (row) => MinedCandidateSchema.parse(row))) {
      const verdict = verdicts.get(judgementKey(candidate.trajectoryId, candidate.path));
      if (verdict === undefined) throw new Error(`weight: candidate ${candidate.trajectoryId} ${candidate.path} has no judgement`);
      if (keepsFile(verdict)) yield { candidate, verdict };
    }
  };

  // Pass 1: β = median l(f) and µraw = mean w̃ over the judged-and-kept candidates.
  const stats = new ReasoningLengthStats();
  for await (const { candidate } of kept()) stats.add(candidate.postReasoningTokens);
  const model = stats.model();
  progress.report({ stage: 'weight', done: 1, total: 3, unit: 'passes', counts: { weighted: stats.candidates } });

  // Pass 2: weights, written as labels (every weighted file, with `retained`).
  let retained = 0;
  const labelRows = async function* (): AsyncGenerator<CatmLabel> {
    if (model === null) return;
    for await (const { candidate, verdict } of kept()) {
      const weightValue = labelWeight(candidate.postReasoningTokens, model);
      const isRetained = isRetainedWeight(weightValue);
      if (isRetained) retained++;
      yield {
        instanceId: candidate.instanceId,
        trajectoryId: candidate.trajectoryId,
        repo: candidate.repo,
        path: candidate.path,
        postReasoningTokens: candidate.postReasoningTokens,
        verdict,
        unnormalizedWeight: unnormalizedWeight(candidate.postReasoningTokens, model.beta),
        weight: weightValue,
        retained: isRetained,
      };
    }
  };
  const labels = await writeParquetArtifact({
    path: labelsPath,
    schemaName: CATM_LABELS_SCHEMA_NAME,
    schemaVersion: CATM_LABELS_SCHEMA_VERSION,
    arrowSchema: catmLabelsArrowSchema,
    rows: labelRows(),
    inputs: labelInputs,
    configHash,
  });
  progress.report({ stage: 'weight', done: 2, total: 3, unit: 'passes', counts: { weighted: stats.candidates, retained } });

  // Samples: instances streamed, retained labels indexed in memory (few).
  const index = await indexRetainedLabels(artifactRows(labels.uri, (row) => CatmLabelSchema.parse(row)));
  const run = buildSamples(readRows(input.instancesPath), index, { source: `instances ${input.instancesPath}` });
  let samples;
  try {
    samples = await writeParquetArtifact({
      path: samplesPath,
      schemaName: SAMPLES_SCHEMA_NAME,
      schemaVersion: SAMPLES_SCHEMA_VERSION,
      arrowSchema: samplesArrowSchema,
      rows: run.samples,
      inputs: sampleInputs,
      configHash,
    });
  } catch (error) {
    if (error instanceof InputFileError) throw ApplicationFailure.create({ type: 'InvalidInput', nonRetryable: true, message: error.message });
    throw error;
  }
  const samplesSummary = run.summary();
  const summary: WeightSummary = {
    beta: model?.beta ?? null,
    muRaw: model?.muRaw ?? null,
    weighted: stats.candidates,
    retained,
    retentionPct: stats.candidates > 0 ? (100 * retained) / stats.candidates : null,
    instancesRead: samplesSummary.instancesRead,
    instancesSkipped: samplesSummary.instancesSkipped,
    samplesWritten: samplesSummary.samplesWritten,
    samplesWithCatm: samplesSummary.samplesWithCatm,
  };
  await writeJsonArtifact(summaryPath, { ...summary, samples: samplesSummary }, { schemaName: SUMMARY_SCHEMA.name, schemaVersion: SUMMARY_SCHEMA.version, inputs: sampleInputs, configHash });
  progress.report({ stage: 'weight', done: 3, total: 3, unit: 'passes', counts: { weighted: stats.candidates, retained, samples: samples.rows } });
  await progress.flush();
  log.info('weight: done', { ...summary });
  return { labels, samples, summary, cached: false };
}
