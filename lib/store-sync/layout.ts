import path from 'node:path';
import { segmentDir, segmentMetricsPath, trainingLayout } from '../training/layout';

/**
 * Where a training run's state lives locally and in the store (README "Deployment: several machines"). The local layout is lib/training's
 * (`trainingLayout`, `segmentDir`, `segmentMetricsPath`):
 *
 *     <runDir>/training/trainer/checkpoints/step-NNNNNNNN/   a checkpoint (complete when it holds COMPLETE)
 *     <runDir>/training/trainer/recipe.json                   the effective recipe the trainer resolved
 *     <runDir>/training/segments/segment-NNNN/attempt-NN.*    each attempt's config, stdout and stderr
 *     <runDir>/training/metrics/segment-NNNN.parquet          the segment's steps, each once
 *
 * In the store the same relative paths sit under `<runId>/`, except that a segment's logs are appended parts
 * (`segments/segment-NNNN/logs/<file>/part-…`, lib/store-sync/log-parts.ts), plus one marker object per
 * pushed checkpoint, `<runId>/training/checkpoint-markers/step-NNNNNNNN.json`, written after the checkpoint's
 * files and after the logs that record its step: the commit record a pull trusts. `<runId>/training/fence/`
 * is the run lease (lib/store-sync/fencing.ts) under which markers are published.
 */
const pad = (n: number, width: number) => String(n).padStart(width, '0');

export const stepDirName = (step: number) => `step-${pad(step, 8)}`;
export const segmentName = (segment: number) => `segment-${pad(segment, 4)}`;

export function localTraining(runDir: string) {
  const layout = trainingLayout(runDir);
  return {
    ...layout,
    recipe: path.join(layout.trainerOutput, 'recipe.json'),
    segmentDir: (segment: number) => segmentDir(runDir, segment),
    segmentMetrics: (segment: number) => segmentMetricsPath(runDir, segment),
  };
}

export function storeTraining(runId: string) {
  const root = `${runId}/training`;
  return {
    samples: `${runId}/environment/samples.parquet`,
    checkpoints: `${root}/trainer/checkpoints`,
    checkpoint: (step: number) => `${root}/trainer/checkpoints/${stepDirName(step)}`,
    markers: `${root}/checkpoint-markers/`,
    marker: (step: number) => `${root}/checkpoint-markers/${stepDirName(step)}.json`,
    recipe: `${root}/trainer/recipe.json`,
    segments: `${root}/segments/`,
    segmentDir: (segment: number) => `${root}/segments/${segmentName(segment)}`,
    /** The appended parts of one of a segment's log files (`attempt-01.stdout.jsonl`, …). */
    logParts: (segment: number, file: string) => `${root}/segments/${segmentName(segment)}/logs/${file}/`,
    fence: `${root}/fence/`,
    fenceEntry: (seq: number) => `${root}/fence/${pad(seq, 10)}.json`,
    metrics: `${root}/metrics/`,
    segmentMetrics: (segment: number) => `${root}/metrics/${segmentName(segment)}.parquet`,
  };
}

/** The complete local checkpoints, oldest first, and the newest (lib/training's). */
export { completeCheckpoints as localCheckpoints, newestCheckpoint as newestLocalCheckpoint } from '../training/checkpoints';
