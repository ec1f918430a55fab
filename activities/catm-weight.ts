import path from 'node:path';
import { log } from '@temporalio/activity';
import { findCachedArtifact, hashConfig, readJsonArtifact, readRows, writeJsonArtifact, writeParquetArtifact } from '../lib/artifacts';
import { keptCandidates } from '../lib/labels/judge-artifacts';
import { RUN_ARTIFACTS } from '../lib/paths/run-artifacts';
import { buildSamples, noSamplesMessage, RetainedLabelIndex } from '../lib/labels/samples';
import { ReasoningLengthStats, weighCandidate } from '../lib/labels/weights';
import { WeightInputSchema, WeightSummarySchema, type WeightInput, type WeightOutput, type WeightSummary } from '../schemas/catm';
import {
  CATM_LABELS_SCHEMA_NAME,
  CATM_LABELS_SCHEMA_VERSION,
  SAMPLES_SCHEMA_NAME,
  SAMPLES_SCHEMA_VERSION,
  catmLabelsArrowSchema,
  samplesArrowSchema,
  SamplesSummarySchema,
  type CatmLabel,
  type SamplesSummary,
} from '../schemas/samples';
import { inputSource, nonRetryable, ProgressReporter, rethrowAsFailure } from './kit';

const SUMMARY_SCHEMA = { name: 'catm.weight-summary', version: 1 } as const;

/**
 * CATM stage 3 (CodeGrep §3.4, Eq. 1–2): two streaming passes over the judged candidates (β and µraw, then the
 * weights), the labels artifact, and the samples artifact that merges them with the gold patches.
 */
export async function weight(rawInput: WeightInput): Promise<WeightOutput> {
  const input = WeightInputSchema.parse(rawInput);
  const outDir = path.join(input.runDir, 'catm');
  const summaryPath = path.join(outDir, 'weight-summary.json');
  const instances = await inputSource('instances', input.instancesPath);
  const configHash = hashConfig({ stage: 'weight' });
  const labelInputs = [input.candidates, input.judgements];
  const sampleInputs = [...labelInputs, instances];
  // Where each artifact goes and what its cache key is (the same object serves the cache check and the write).
  const labelsOut = {
    path: path.join(outDir, 'labels.parquet'),
    schemaName: CATM_LABELS_SCHEMA_NAME,
    schemaVersion: CATM_LABELS_SCHEMA_VERSION,
    inputs: labelInputs,
  };
  const samplesOut = {
    path: path.join(input.runDir, RUN_ARTIFACTS.catmSamples),
    schemaName: SAMPLES_SCHEMA_NAME,
    schemaVersion: SAMPLES_SCHEMA_VERSION,
    inputs: sampleInputs,
  };
  const summaryOut = { schemaName: SUMMARY_SCHEMA.name, schemaVersion: SUMMARY_SCHEMA.version, inputs: sampleInputs, configHash };

  const cachedLabels = await findCachedArtifact(labelsOut.path, { ...labelsOut, configHash });
  const cachedSamples = await findCachedArtifact(samplesOut.path, { ...samplesOut, configHash });
  const cachedSummary = await findCachedArtifact(summaryPath, summaryOut);
  const source = `instances ${input.instancesPath}`;
  if (cachedLabels && cachedSamples && cachedSummary) {
    log.info('weight: cache hit', { samples: cachedSamples.uri });
    const stored = (await readJsonArtifact(cachedSummary.uri)) as { samples?: unknown };
    const samplesSummary = SamplesSummarySchema.safeParse(stored.samples);
    // A cached run that wrote nothing failed then, and fails again (not a ✓ from the cache).
    if (samplesSummary.success) failOnNoSamples(samplesSummary.data, source);
    return {
      labels: cachedLabels,
      samples: cachedSamples,
      summary: WeightSummarySchema.parse(stored),
      cached: true,
    };
  }

  const progress = new ProgressReporter();
  try {
    const kept = await keptCandidates(input.candidates.uri, input.judgements.uri);
    // Pass 1: β = median l(f) and µraw = mean w̃ over the judged-and-kept candidates.
    const stats = new ReasoningLengthStats();
    for await (const { candidate } of kept()) stats.add(candidate.postReasoningTokens);
    const model = stats.model();
    progress.report({ stage: 'weight', done: 1, total: 3, unit: 'passes', counts: { weighted: stats.candidates } });

    // Pass 2: weights, written as labels (every weighted file, with `retained`). The retained ones are indexed
    // for the samples as they are written, in the file's order (they are few): the same labels, and the same
    // ties, as reading labels.parquet back would give, without a third pass over what was just written.
    const index = new RetainedLabelIndex();
    const labelRows = async function* (): AsyncGenerator<CatmLabel> {
      if (model === null) return;
      for await (const { candidate, verdict } of kept()) {
        const label = weighCandidate(candidate, verdict, model);
        index.add(label);
        yield label;
      }
    };
    const labels = await writeParquetArtifact({ ...labelsOut, configHash, arrowSchema: catmLabelsArrowSchema, rows: labelRows() });
    const retained = index.labelsRetained;
    progress.report({ stage: 'weight', done: 2, total: 3, unit: 'passes', counts: { weighted: stats.candidates, retained } });

    // Samples: instances streamed, merged with the retained labels indexed above.
    const run = buildSamples(readRows(input.instancesPath), index, { source });
    const samples = await writeParquetArtifact({ ...samplesOut, configHash, arrowSchema: samplesArrowSchema, rows: run.samples }).catch(
      rethrowAsFailure,
    );
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
    await writeJsonArtifact(summaryPath, { ...summary, samples: samplesSummary }, summaryOut);
    failOnNoSamples(samplesSummary, source);
    progress.report({
      stage: 'weight',
      done: 3,
      total: 3,
      unit: 'passes',
      counts: { weighted: stats.candidates, retained, samples: samples.rows },
    });
    await progress.flush();
    log.info('weight: done', { ...summary });
    return { labels, samples, summary, cached: false };
  } finally {
    progress.close();
  }
}

/** Non-empty instances in, no sample out: the stage failed (NoUsableInstances), the skip reasons counted in its message. */
function failOnNoSamples(summary: SamplesSummary, source: string): void {
  const message = noSamplesMessage(summary, source);
  if (message !== null)
    throw nonRetryable('NoUsableInstances', message, { instancesRead: summary.instancesRead, instancesSkipped: summary.instancesSkipped });
}
