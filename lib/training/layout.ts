import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { RUN_ARTIFACTS } from '../paths/run-artifacts';

/**
 * Where a training run keeps its files, and which files are there.
 *
 *     <runDir>/training/
 *       trainer/                        the trainer's output_dir: checkpoints/step-NNNNNNNN/, metrics.jsonl
 *       segments/segment-NNNN/          attempt-NN.config.json, attempt-NN.stdout.jsonl, attempt-NN.stderr.log
 *       metrics/segment-NNNN.parquet    the segment's steps, each once
 *       metrics.parquet                 every step of the run, each once (the report activity)
 *       report/                         index.html, report.md, <plot>.svg
 *       trainer.pid.json                the running trainer, for the next attempt to reap
 */
export function trainingLayout(runDir: string) {
  const root = path.join(runDir, 'training');
  return {
    root,
    trainerOutput: path.join(root, 'trainer'),
    checkpoints: path.join(runDir, RUN_ARTIFACTS.trainingCheckpoints),
    segments: path.join(root, 'segments'),
    metricsDir: path.join(root, 'metrics'),
    merged: path.join(root, 'metrics.parquet'),
    report: path.join(root, 'report'),
    pidFile: path.join(root, 'trainer.pid.json'),
  };
}

const pad = (n: number, width: number) => String(n).padStart(width, '0');

export function segmentDir(runDir: string, segment: number): string {
  return path.join(trainingLayout(runDir).segments, `segment-${pad(segment, 4)}`);
}

export function segmentMetricsPath(runDir: string, segment: number): string {
  return path.join(trainingLayout(runDir).metricsDir, `segment-${pad(segment, 4)}.parquet`);
}

export function attemptFiles(dir: string, attempt: number) {
  const stem = path.join(dir, `attempt-${pad(attempt, 2)}`);
  return { config: `${stem}.config.json`, stdout: `${stem}.stdout.jsonl`, stderr: `${stem}.stderr.log` };
}

/** Segment numbers that have a log folder or a metrics file, ascending. */
export function listSegments(runDir: string): number[] {
  const layout = trainingLayout(runDir);
  const found = new Set<number>();
  for (const [dir, pattern] of [
    [layout.segments, /^segment-(\d+)$/],
    [layout.metricsDir, /^segment-(\d+)\.parquet$/],
  ] as const) {
    if (!existsSync(dir)) continue;
    for (const name of readdirSync(dir)) {
      const match = pattern.exec(name);
      if (match) found.add(Number(match[1]));
    }
  }
  return [...found].sort((a, b) => a - b);
}

/** The number for a new attempt's files in a segment folder: one above the highest there (attempt files are never reused). */
export function nextAttemptNumber(dir: string): number {
  const taken = readdirSync(dir)
    .map((name) => /^attempt-(\d+)\./.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]));
  return taken.length === 0 ? 1 : Math.max(...taken) + 1;
}
