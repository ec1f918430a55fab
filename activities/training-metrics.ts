import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { z } from 'zod';
import { ApplicationFailure } from '@temporalio/activity';
import { readParquetObjects } from '../lib/artifacts';
import { TrainerEventSchema, TrainerStepLineSchema, stepLineToMetricsRow, type TrainingMetricsRow } from '../schemas/training';

/**
 * Where a training run keeps its files, and how step lines become metrics rows with each step once.
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
    checkpoints: path.join(root, 'trainer', 'checkpoints'),
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

/** The newest complete checkpoint (trainer/checkpoint.py: `step-NNNNNNNN/` holding a COMPLETE marker). */
export function newestCheckpoint(runDir: string): { step: number; path: string } | null {
  const dir = trainingLayout(runDir).checkpoints;
  if (!existsSync(dir)) return null;
  let newest: { step: number; path: string } | null = null;
  for (const name of readdirSync(dir)) {
    const match = /^step-(\d+)$/.exec(name);
    if (!match || !existsSync(path.join(dir, name, 'COMPLETE'))) continue;
    const step = Number(match[1]);
    if (!newest || step > newest.step) newest = { step, path: path.join(dir, name) };
  }
  return newest;
}

/** Parses one stdout line; a `step` line the schema refuses is a broken trainer contract (non-retryable). */
export function stepRowFromLine(text: string, where: { segment: number; attempt: number; line: number; file: string }): TrainingMetricsRow | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null; // not one of the trainer's JSON lines (a library writing to stdout)
  }
  if (value === null || typeof value !== 'object' || (value as { event?: unknown }).event !== 'step') return null;
  const parsed = TrainerStepLineSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw ApplicationFailure.create({
      type: 'TrainerProtocolError',
      nonRetryable: true,
      message: `${where.file}:${where.line}: the trainer's step line does not match trainer/README.md "Output": ${issue.path.join('.') || '(line)'}: ${issue.message}`,
    });
  }
  return stepLineToMetricsRow(parsed.data, { segment: where.segment, attempt: where.attempt, line: where.line });
}

/** Every step line of every attempt of a segment, in (attempt, line) order. */
export function readSegmentLogRows(runDir: string, segment: number): TrainingMetricsRow[] {
  const dir = segmentDir(runDir, segment);
  if (!existsSync(dir)) return [];
  const attempts = readdirSync(dir)
    .map((name) => /^attempt-(\d+)\.stdout\.jsonl$/.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
  const rows: TrainingMetricsRow[] = [];
  for (const attempt of attempts) {
    const file = attemptFiles(dir, attempt).stdout;
    const lines = readFileSync(file, 'utf8').split('\n');
    lines.forEach((text, i) => {
      if (text.trim() === '') return;
      const row = stepRowFromLine(text, { segment, attempt, line: i + 1, file });
      if (row) rows.push(row);
    });
  }
  return rows;
}

const order = (a: TrainingMetricsRow, b: TrainingMetricsRow) => a.segment - b.segment || a.attempt - b.attempt || a.line - b.line;

/**
 * One row per step, the newest record of each (by segment, attempt, line): a step redone after a resume
 * from an earlier checkpoint replaces the record whose update was lost. Sorted by step.
 */
export function newestPerStep(rows: readonly TrainingMetricsRow[]): TrainingMetricsRow[] {
  const byStep = new Map<number, TrainingMetricsRow>();
  for (const row of [...rows].sort(order)) byStep.set(row.step, row);
  return [...byStep.values()].sort((a, b) => a.step - b.step);
}

/** Steps in 1..last with no row. */
export function missingSteps(rows: readonly TrainingMetricsRow[], last: number): number[] {
  const have = new Set(rows.map((r) => r.step));
  const missing: number[] = [];
  for (let step = 1; step <= last; step++) if (!have.has(step)) missing.push(step);
  return missing;
}

/**
 * Every recorded step of the run up to `lastStep`, each once: a segment's metrics Parquet where it wrote one,
 * else its logs (a segment whose workflow ended before it could finish).
 */
export async function runMetricsRows(runDir: string, lastStep: number): Promise<TrainingMetricsRow[]> {
  const rows: TrainingMetricsRow[] = [];
  for (const segment of listSegments(runDir)) {
    const file = segmentMetricsPath(runDir, segment);
    if (existsSync(file)) rows.push(...((await readParquetObjects(file)) as unknown as TrainingMetricsRow[]));
    else rows.push(...readSegmentLogRows(runDir, segment));
  }
  return newestPerStep(rows).filter((row) => row.step <= lastStep);
}

type TrainerStartEvent = Extract<z.infer<typeof TrainerEventSchema>, { event: 'start' }>;

/** The `start` line of each trainer attempt of one segment, oldest attempt first (attempt files sort by name). */
export function segmentTrainerStarts(runDir: string, segment: number): TrainerStartEvent[] {
  const dir = segmentDir(runDir, segment);
  if (!existsSync(dir)) return [];
  const starts: TrainerStartEvent[] = [];
  for (const name of readdirSync(dir).filter((n) => n.endsWith('.stdout.jsonl')).sort()) {
    for (const line of readFileSync(path.join(dir, name), 'utf8').split('\n')) {
      if (!line.startsWith('{')) continue;
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch {
        continue;
      }
      const event = TrainerEventSchema.safeParse(value);
      if (!event.success || event.data.event !== 'start') continue;
      starts.push(event.data as TrainerStartEvent);
      break;
    }
  }
  return starts;
}

/**
 * The rollout engines the run's trainers reported in their `start` lines (trainer/engines.py), each once, e.g.
 * `hf — auto: no CUDA device (cpu), so vLLM cannot run — 2 processes`: the run report names them.
 */
export function rolloutEngines(runDir: string): string[] {
  const found = new Set<string>();
  for (const segment of listSegments(runDir)) {
    for (const start of segmentTrainerStarts(runDir, segment)) {
      const processes = start.world_size ?? 1;
      found.add([start.generator, start.generator_reason, `${processes} process${processes === 1 ? '' : 'es'} on ${start.device}`].filter(Boolean).join(' — '));
    }
  }
  return [...found];
}
