import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { ResolvedTrainingConfig } from '../../schemas/training/config';
import type { TrainSegmentResult } from '../../schemas/training/activity-io';
import type { TrainingMetricsRow } from '../../schemas/training/metrics';
import type { TrainerRun } from './run-trainer';
import { latestStepMetrics } from './step-lines';

/** Trainer stderr that no retry can fix: a bad config, data that does not match the checkpoints, no trainer. */
const PERMANENT_TRAINER_ERRORS = [/ConfigError/, /refusing to resume/, /No module named '?trainer/];

/** What on this node keeps the section from training at all (a config error), or null. */
export function trainingNodeProblem(training: Pick<ResolvedTrainingConfig, 'python' | 'modelDir'>): string | null {
  if (!existsSync(training.python)) return `training.python: ${training.python} does not exist (run scripts/setup-python.sh on this node)`;
  if (!existsSync(path.join(training.modelDir, 'config.json'))) {
    return `training.modelDir: ${training.modelDir} is not a local model directory (no config.json); copy the model to the node or build a tiny one with python -m trainer.random_model`;
  }
  return null;
}

/** Why a segment whose trainer exited 0 ended: the target step, a cancellation, the budget, or a signal from outside. */
export function segmentStoppedBy(run: Pick<TrainerRun, 'stopReason' | 'state'>): TrainSegmentResult['stoppedBy'] {
  if (run.stopReason === 'target') return 'target';
  if (run.stopReason === 'cancelled') return 'cancelled';
  return run.state.finished === 'done' ? 'budget' : 'signal';
}

/** A trainer that exited non-zero: the message (with its stderr's tail) and whether a retry could help. */
export async function trainerFailure(
  run: Pick<TrainerRun, 'exit' | 'state'>,
  segment: number,
  stderrFile: string,
): Promise<{ permanent: boolean; message: string }> {
  const stderr = await readFile(stderrFile, 'utf8').then(
    (text) => text.slice(-3000),
    () => '',
  );
  const { exit } = run;
  const how = exit.code !== null ? `code ${exit.code}` : `signal ${exit.signal}`;
  return {
    permanent: PERMANENT_TRAINER_ERRORS.some((pattern) => pattern.test(stderr)),
    message: `the trainer exited with ${how} at step ${run.state.step} (segment ${segment}, log ${stderrFile}):\n${stderr}`,
  };
}

export interface SegmentResultFields extends Pick<
  TrainSegmentResult,
  'segment' | 'step' | 'checkpoint' | 'stoppedBy' | 'resumedFrom' | 'attempt' | 'metrics'
> {
  /** The segment's metrics rows, each step once: the last is the result's `latest`. */
  rows: readonly TrainingMetricsRow[];
  instances: number;
  skipped: number;
  parameters: number | null;
  device: string | null;
  /** When the activity attempt started (ms since the epoch), for `wallSeconds`. */
  startedAt: number;
}

export function segmentResult(fields: SegmentResultFields): TrainSegmentResult {
  const last = fields.rows[fields.rows.length - 1];
  return {
    segment: fields.segment,
    step: fields.step,
    checkpoint: fields.checkpoint,
    stoppedBy: fields.stoppedBy,
    resumedFrom: fields.resumedFrom,
    attempt: fields.attempt,
    metrics: fields.metrics,
    latest: last ? latestStepMetrics(last) : null,
    instances: fields.instances,
    skippedSamples: fields.skipped,
    trainerParameters: fields.parameters,
    device: fields.device,
    wallSeconds: (Date.now() - fields.startedAt) / 1000,
  };
}
