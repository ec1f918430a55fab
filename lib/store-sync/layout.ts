import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';

/**
 * Where a training run's state lives locally and in the store (issue #13). The local layout is the one of
 * activities/training-metrics.ts `trainingLayout` (repeated here: lib/ does not import activities/):
 *
 *     <runDir>/training/trainer/checkpoints/step-NNNNNNNN/   a checkpoint (complete when it holds COMPLETE)
 *     <runDir>/training/trainer/recipe.json                   the effective recipe the trainer resolved
 *     <runDir>/training/segments/segment-NNNN/attempt-NN.*    each attempt's config, stdout and stderr
 *     <runDir>/training/metrics/segment-NNNN.parquet          the segment's steps, each once
 *
 * In the store the same relative paths sit under `<runId>/`, plus one marker object per pushed checkpoint,
 * `<runId>/training/checkpoint-markers/step-NNNNNNNN.json`, written after the checkpoint's files and after
 * the logs that record its step: the commit record a pull trusts.
 */
const pad = (n: number, width: number) => String(n).padStart(width, '0');

export const stepDirName = (step: number) => `step-${pad(step, 8)}`;
export const segmentName = (segment: number) => `segment-${pad(segment, 4)}`;

export function localTraining(runDir: string) {
  const root = path.join(runDir, 'training');
  return {
    root,
    trainerOutput: path.join(root, 'trainer'),
    checkpoints: path.join(root, 'trainer', 'checkpoints'),
    recipe: path.join(root, 'trainer', 'recipe.json'),
    segments: path.join(root, 'segments'),
    segmentDir: (segment: number) => path.join(root, 'segments', segmentName(segment)),
    metricsDir: path.join(root, 'metrics'),
    segmentMetrics: (segment: number) => path.join(root, 'metrics', `${segmentName(segment)}.parquet`),
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
    metrics: `${root}/metrics/`,
    segmentMetrics: (segment: number) => `${root}/metrics/${segmentName(segment)}.parquet`,
  };
}

/** The complete local checkpoints (`step-N/` holding the trainer's COMPLETE marker), oldest first. */
export function localCheckpoints(runDir: string): { step: number; path: string }[] {
  const dir = localTraining(runDir).checkpoints;
  if (!existsSync(dir)) return [];
  const found: { step: number; path: string }[] = [];
  for (const name of readdirSync(dir)) {
    const match = /^step-(\d+)$/.exec(name);
    if (!match || !existsSync(path.join(dir, name, 'COMPLETE'))) continue;
    found.push({ step: Number(match[1]), path: path.join(dir, name) });
  }
  return found.sort((a, b) => a.step - b.step);
}

/** The newest complete local checkpoint. */
export function newestLocalCheckpoint(runDir: string): { step: number; path: string } | null {
  return localCheckpoints(runDir).at(-1) ?? null;
}
