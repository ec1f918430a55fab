import path from 'node:path';
import { log } from '@temporalio/activity';
import { hashConfig, readJsonArtifact, readRows, writeJsonArtifact, writeParquetArtifact } from '../lib/artifacts';
import { cachedOutputs, catmPath, catmSummaryOutput } from '../lib/labels/catm-outputs';
import { keptCandidates } from '../lib/labels/judge-artifacts';
import { buildSamples, noSamplesMessage, RetainedLabelIndex } from '../lib/labels/samples';
import { fitWeightModel, weighedLabels, weightSummary } from '../lib/labels/weigh-kept';
import { RUN_ARTIFACTS } from '../lib/paths/run-artifacts';
import type { ArtifactRef } from '../schemas/artifact-ref';
import { WeightInputSchema, WeightSummarySchema, type WeightInput, type WeightOutput } from '../schemas/catm';
import {
  CATM_LABELS_SCHEMA_NAME,
  CATM_LABELS_SCHEMA_VERSION,
  SAMPLES_SCHEMA_NAME,
  SAMPLES_SCHEMA_VERSION,
  catmLabelsArrowSchema,
  samplesArrowSchema,
  SamplesSummarySchema,
  type SamplesSummary,
} from '../schemas/samples';
import { inputSource, nonRetryable, ProgressReporter, rethrowAsFailure } from './kit';

/**
 * CATM stage 3 (CodeGrep §3.4, Eq. 1–2): two streaming passes over the judged candidates (β and µraw, then the
 * weights), the labels artifact, and the samples artifact that merges them with the gold patches.
 */
export async function weight(rawInput: WeightInput): Promise<WeightOutput> {
  const input = WeightInputSchema.parse(rawInput);
  const outputs = weightOutputs(input, await inputSource('instances', input.instancesPath));
  const source = `instances ${input.instancesPath}`;
  const cached = await cachedOutputs(outputs);
  if (cached) return cachedResult(cached, source);

  const progress = new ProgressReporter();
  const passes = (done: number, counts: Record<string, number>) =>
    progress.report({ stage: 'weight', done, total: 3, unit: 'passes', counts });
  try {
    const kept = await keptCandidates(input.candidates.uri, input.judgements.uri);
    const model = await fitWeightModel(kept);
    const weighted = model?.candidates ?? 0;
    passes(1, { weighted });

    const index = new RetainedLabelIndex();
    const labels = await writeParquetArtifact({
      ...outputs.labels,
      arrowSchema: catmLabelsArrowSchema,
      rows: weighedLabels(kept, model, index),
    });
    const retained = index.labelsRetained;
    passes(2, { weighted, retained });

    // Samples: instances streamed, merged with the retained labels indexed as they were written.
    const run = buildSamples(readRows(input.instancesPath), index, { source });
    const samples = await writeParquetArtifact({ ...outputs.samples, arrowSchema: samplesArrowSchema, rows: run.samples }).catch(
      rethrowAsFailure,
    );
    const samplesSummary = run.summary();
    const summary = weightSummary(model, retained, samplesSummary);
    await writeJsonArtifact(outputs.summary.path, { ...summary, samples: samplesSummary }, outputs.summary);
    failOnNoSamples(samplesSummary, source);
    passes(3, { weighted, retained, samples: samples.rows });
    await progress.flush();
    log.info('weight: done', { ...summary });
    return { labels, samples, summary, cached: false };
  } finally {
    progress.close();
  }
}

/** Where each output goes and what its cache key is: labels from the judged candidates, the rest with the instances. */
function weightOutputs(input: Pick<WeightInput, 'runDir' | 'candidates' | 'judgements'>, instances: ArtifactRef) {
  const configHash = hashConfig({ stage: 'weight' });
  const labelInputs = [input.candidates, input.judgements];
  const sampleInputs = [...labelInputs, instances];
  return {
    labels: {
      path: catmPath(input.runDir, 'labels.parquet'),
      schemaName: CATM_LABELS_SCHEMA_NAME,
      schemaVersion: CATM_LABELS_SCHEMA_VERSION,
      inputs: labelInputs,
      configHash,
    },
    samples: {
      path: path.join(input.runDir, RUN_ARTIFACTS.catmSamples),
      schemaName: SAMPLES_SCHEMA_NAME,
      schemaVersion: SAMPLES_SCHEMA_VERSION,
      inputs: sampleInputs,
      configHash,
    },
    summary: catmSummaryOutput(input.runDir, 'weight', sampleInputs, configHash),
  };
}

/** A cache hit's result. A cached run that wrote nothing failed then, and fails again (not a ✓ from the cache). */
async function cachedResult(cached: Record<'labels' | 'samples' | 'summary', ArtifactRef>, source: string): Promise<WeightOutput> {
  log.info('weight: cache hit', { samples: cached.samples.uri });
  const stored = (await readJsonArtifact(cached.summary.uri)) as { samples?: unknown };
  const samplesSummary = SamplesSummarySchema.safeParse(stored.samples);
  if (samplesSummary.success) failOnNoSamples(samplesSummary.data, source);
  return { labels: cached.labels, samples: cached.samples, summary: WeightSummarySchema.parse(stored), cached: true };
}

/** Non-empty instances in, no sample out: the stage failed (NoUsableInstances), the skip reasons counted in its message. */
function failOnNoSamples(summary: SamplesSummary, source: string): void {
  const message = noSamplesMessage(summary, source);
  if (message !== null)
    throw nonRetryable('NoUsableInstances', message, { instancesRead: summary.instancesRead, instancesSkipped: summary.instancesSkipped });
}
