import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { hashConfig, writeParquetArtifact } from '../lib/artifacts';
import type { ArtifactRef } from '../schemas/artifact-ref';
import {
  TRAINING_METRICS_SCHEMA_NAME,
  TRAINING_METRICS_SCHEMA_VERSION,
  trainingMetricsArrowSchema,
  type TrainingMetricsRow,
} from '../schemas/training/metrics';
import { compareSegmentSplit, dropKeys, isSegmentFile, stable, TRAINING_METRICS_SPLIT, withoutSegmentInputs } from './chaos-compare';

const samples: ArtifactRef = {
  uri: '/runs/r/training/training-samples.parquet',
  sha256: 'b'.repeat(64),
  rows: 1,
  schema: 'catm.samples',
  schemaVersion: 3,
};

/** One step's metrics row as the trainer reports it; `stepTimeS` is what varies between two uninterrupted runs. */
function metricsRow(step: number, segment: number, extra: Partial<TrainingMetricsRow> = {}): TrainingMetricsRow {
  return {
    step,
    epoch: 0,
    rewardMean: 0.25 * step,
    rewardStd: 0,
    rewardComponents: [{ name: 'file_fbeta', value: 0.25 * step }],
    kl: 0.01,
    loss: 0.5,
    clipRatio: 0,
    gradNorm: 1,
    lr: 1e-3,
    turnsMean: 1,
    toolCallsPerTurnMean: 1,
    advantageScaleMean: 1,
    answeredRatio: 1,
    hitTurnLimitRatio: 0,
    maskedRatio: 0.5,
    completionLenMean: 8,
    truncatedRatio: 0,
    stepTimeS: 1,
    rolloutTimeS: 0.5,
    updateTimeS: 0.5,
    rolloutTokens: 100,
    trainTokens: 80,
    rolloutTokensPerS: 200,
    trainTokensPerS: 160,
    peakGpuMemGb: null,
    policyVersion: step - 1,
    staleness: 0,
    checkpoint: `/runs/r/training/trainer/checkpoints/step-${step}`,
    segment,
    attempt: 1,
    line: 2 * step + 1,
    ...extra,
  };
}

const writeMetrics = (file: string, rows: TrainingMetricsRow[], inputs: ArtifactRef[]) =>
  writeParquetArtifact({
    path: file,
    schemaName: TRAINING_METRICS_SCHEMA_NAME,
    schemaVersion: TRAINING_METRICS_SCHEMA_VERSION,
    arrowSchema: trainingMetricsArrowSchema,
    rows,
    inputs,
    configHash: hashConfig({ file: path.basename(file) }),
  });

let root: string;
beforeEach(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'chaos-compare-'));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

/**
 * A training folder as the segments and the report write it: `metrics/segment-NNNN.parquet` per segment (the
 * steps each ran) and `metrics.parquet` merging them, its manifest listing them as inputs.
 */
async function trainingFolder(name: string, segments: number[][], edit: (row: TrainingMetricsRow) => TrainingMetricsRow = (r) => r) {
  const dir = path.join(root, name);
  const refs: ArtifactRef[] = [];
  const merged: TrainingMetricsRow[] = [];
  for (const [i, steps] of segments.entries()) {
    const rows = steps.map((step) => edit(metricsRow(step, i + 1)));
    refs.push(await writeMetrics(path.join(dir, 'metrics', `segment-${String(i + 1).padStart(4, '0')}.parquet`), rows, [samples]));
    merged.push(...rows);
  }
  await writeMetrics(path.join(dir, 'metrics.parquet'), merged, refs);
  return dir;
}

describe('compareSegmentSplit (the chaos suite: training metrics split into segments by timing)', () => {
  it('a run that trained both steps in one segment has the same steps as references that used two, and the reverse', async () => {
    const trial = await trainingFolder('trial', [[1, 2]]);
    const refA = await trainingFolder('a', [[1], [2]], (r) => ({ ...r, stepTimeS: 1.5 }));
    const refB = await trainingFolder('b', [[1], [2]], (r) => ({ ...r, stepTimeS: 2.5 }));
    const result = await compareSegmentSplit(TRAINING_METRICS_SPLIT, trial, refA, refB);
    expect(result).toEqual({
      same: true,
      trialSegments: ['metrics/segment-0001.parquet'],
      referenceSegments: ['metrics/segment-0001.parquet', 'metrics/segment-0002.parquet'],
      stepsTwice: [],
      problems: [],
      rowDiffs: [],
    });
    expect((await compareSegmentSplit(TRAINING_METRICS_SPLIT, refA, trial, refB)).same).toBe(true);
  });

  it('differs when a step is missing from every segment', async () => {
    const trial = await trainingFolder('trial', [[1]]);
    const refA = await trainingFolder('a', [[1], [2]]);
    const refB = await trainingFolder('b', [[1, 2]]);
    const result = await compareSegmentSplit(TRAINING_METRICS_SPLIT, trial, refA, refB);
    expect(result.same).toBe(false);
    expect(result.rowDiffs).toHaveLength(1);
    expect(result.rowDiffs[0]).toMatchObject({ row: 1, fields: { step: { trial: undefined, reference: 2 } } });
  });

  it('differs when a step is in two segments', async () => {
    const trial = await trainingFolder('trial', [[1, 2], [2]]);
    const refA = await trainingFolder('a', [[1], [2]]);
    const refB = await trainingFolder('b', [[1], [2]]);
    const result = await compareSegmentSplit(TRAINING_METRICS_SPLIT, trial, refA, refB);
    expect(result.same).toBe(false);
    expect(result.stepsTwice).toEqual([2]);
  });

  it('differs when a step measured something else, while fields that vary between the references are left out', async () => {
    const refA = await trainingFolder('a', [[1], [2]], (r) => ({ ...r, stepTimeS: 1.5 }));
    const refB = await trainingFolder('b', [[1, 2]], (r) => ({ ...r, stepTimeS: 2.5 }));
    const trial = await trainingFolder('trial', [[1, 2]], (r) => (r.step === 2 ? { ...r, rewardMean: 9, stepTimeS: 7 } : r));
    const result = await compareSegmentSplit(TRAINING_METRICS_SPLIT, trial, refA, refB);
    expect(result.same).toBe(false);
    expect(result.rowDiffs).toEqual([{ row: 1, fields: { rewardMean: { trial: 9, reference: 0.5 } } }]);
  });

  it('differs when a segment file’s manifest does not describe it, or the merged manifest does not list the segment files', async () => {
    const refA = await trainingFolder('a', [[1], [2]]);
    const refB = await trainingFolder('b', [[1], [2]]);
    const trial = await trainingFolder('trial', [[1], [2]]);
    const mergedManifest = path.join(trial, 'metrics.parquet.manifest.json');
    const manifest = JSON.parse(readFileSync(mergedManifest, 'utf8')) as { inputs: unknown[] };
    writeFileSync(mergedManifest, JSON.stringify({ ...manifest, inputs: manifest.inputs.slice(0, 1) }));
    const segmentManifest = path.join(trial, 'metrics', 'segment-0002.parquet.manifest.json');
    writeFileSync(segmentManifest, JSON.stringify({ ...JSON.parse(readFileSync(segmentManifest, 'utf8')), rows: 5 }));
    const result = await compareSegmentSplit(TRAINING_METRICS_SPLIT, trial, refA, refB);
    expect(result.same).toBe(false);
    expect(result.problems).toEqual([
      'metrics/segment-0002.parquet: its manifest does not describe it (sha256 or rows)',
      'metrics.parquet.manifest.json: its inputs name ["metrics/segment-0001.parquet"], not the segment files ["metrics/segment-0001.parquet","metrics/segment-0002.parquet"]',
    ]);
  });
});

describe('the merged metrics manifest in the chaos comparison', () => {
  it('is the reference’s once the segment files it lists (checked by compareSegmentSplit) are left out of its inputs', async () => {
    const trial = await trainingFolder('trial', [[1, 2]]);
    const refA = await trainingFolder('a', [[1], [2]]);
    const refB = await trainingFolder('b', [[1], [2]], (r) => ({ ...r, stepTimeS: 3 }));
    const read = (dir: string) => JSON.parse(readFileSync(path.join(dir, 'metrics.parquet.manifest.json'), 'utf8')) as unknown;
    const [t, a, b] = [trial, refA, refB].map((dir) => dropKeys(read(dir), ['sha256', 'bytes', 'uri', 'createdAt']));
    // Without the fix: the inputs differ (one segment file against two), as in the flaky trial.
    expect(JSON.stringify(stable(t, a, b))).not.toBe(JSON.stringify(stable(a, a, b)));
    const view = (m: unknown) => withoutSegmentInputs(TRAINING_METRICS_SPLIT, m);
    expect(stable(view(t), view(a), view(b))).toEqual(stable(view(a), view(a), view(b)));
    // Inputs that are not segment files stay compared.
    expect(
      withoutSegmentInputs(TRAINING_METRICS_SPLIT, { inputs: [samples, { uri: '/x/training/metrics/segment-0003.parquet' }] }),
    ).toEqual({
      inputs: [samples],
    });
  });

  it('leaves only the segment files and their manifests to the union comparison', () => {
    expect(isSegmentFile(TRAINING_METRICS_SPLIT, 'metrics/segment-0002.parquet')).toBe(true);
    expect(isSegmentFile(TRAINING_METRICS_SPLIT, 'metrics/segment-0002.parquet.manifest.json')).toBe(true);
    expect(isSegmentFile(TRAINING_METRICS_SPLIT, 'metrics.parquet')).toBe(false);
    expect(isSegmentFile(TRAINING_METRICS_SPLIT, 'validation.parquet')).toBe(false);
  });
});
