import type { LatestStepMetrics } from '../../schemas/training/metrics';
import { TrainerEventSchema } from '../../schemas/training/trainer-protocol';
import { latestStepMetrics, stepRowFromLine } from './step-lines';

/**
 * What a running segment knows from its trainer's stdout, and how each line changes it: a pure state machine,
 * so the segment activity only carries out the effects (heartbeat, progress signal, stop at the target).
 */
export interface SegmentState {
  step: number;
  checkpoint: string | null;
  checkpointStep: number | null;
  latest: LatestStepMetrics | null;
  /** From the trainer's `start` line: model size and device, for the segment result. */
  parameters: number | null;
  device: string | null;
  /** The trainer's last word: `done` (the budget) or `stopped` (a SIGTERM, at a checkpoint). */
  finished: 'done' | 'stopped' | null;
}

export interface TrainerLine {
  text: string;
  /** 1-based line of the attempt's stdout file, which the line's metrics row records. */
  line: number;
  file: string;
  segment: number;
  attempt: number;
}

export interface TrainerEventOutcome {
  state: SegmentState;
  /** The step or checkpoint moved: heartbeat it. */
  heartbeat: boolean;
  /** Signal progress to the workflow: a checkpoint always (`now`), a step when the throttle allows. */
  progress: 'now' | 'throttled' | null;
  /** The step this segment was started for is done: stop the trainer (it checkpoints and exits). */
  targetReached: boolean;
}

/** A segment about to start its trainer, resuming from the newest checkpoint (null for a fresh run). */
export function initialSegmentState(resumeFrom: { step: number; path: string } | null): SegmentState {
  return {
    step: resumeFrom?.step ?? 0,
    checkpoint: resumeFrom?.path ?? null,
    checkpointStep: resumeFrom?.step ?? null,
    latest: null,
    parameters: null,
    device: null,
    finished: null,
  };
}

/**
 * Applies one stdout line to the segment's state. Lines that are not the trainer's JSON (a library printing to
 * stdout) change nothing; a `step` line that breaks the contract throws TrainerProtocolError.
 */
export function applyTrainerEvent(
  state: SegmentState,
  line: TrainerLine,
  target: { targetStep: number; totalSteps: number },
): TrainerEventOutcome {
  const unchanged: TrainerEventOutcome = { state, heartbeat: false, progress: null, targetReached: false };
  let value: unknown;
  try {
    value = JSON.parse(line.text);
  } catch {
    return unchanged;
  }
  const where = { segment: line.segment, attempt: line.attempt, line: line.line, file: line.file };
  const event = TrainerEventSchema.safeParse(value);
  if (!event.success) {
    stepRowFromLine(line.text, where); // throws for a bad step line
    return unchanged;
  }
  const e = event.data;
  switch (e.event) {
    case 'start':
      return { ...unchanged, state: { ...state, parameters: e.parameters, device: e.device } };
    case 'resumed':
      return { ...unchanged, state: { ...state, step: e.step, checkpoint: e.checkpoint, checkpointStep: e.step }, heartbeat: true };
    case 'checkpoint':
      return { ...unchanged, state: { ...state, checkpoint: e.path, checkpointStep: e.step }, heartbeat: true, progress: 'now' };
    case 'step': {
      const row = stepRowFromLine(line.text, where)!;
      return {
        state: { ...state, step: row.step, latest: latestStepMetrics(row) },
        heartbeat: true,
        progress: 'throttled',
        targetReached: row.step >= target.targetStep && target.targetStep < target.totalSteps,
      };
    }
    case 'done':
    case 'stopped':
      return { ...unchanged, state: { ...state, finished: e.event, step: e.step } };
  }
}
