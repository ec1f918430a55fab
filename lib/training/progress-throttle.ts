import type { TrainingProgress } from '../../schemas/training/activity-io';

/**
 * Which `trainingProgress` signals a segment sends its workflow. Each signal costs the workflow about 4 history
 * events, so one goes out only when the step or the checkpoint step passed the newest one signalled for this
 * segment (by any attempt: `signalled` lives in the heartbeat details). A segment of `segmentSteps` steps
 * therefore sends at most 2 × segmentSteps signals however long it runs or retries.
 */
export class ProgressThrottle {
  private lastAt = 0;

  constructor(
    private readonly everyMs: number,
    /** Updated in place: the heartbeat details carry it to the next attempt. */
    private readonly signalled: { step: number; checkpointStep: number },
  ) {}

  /** Whether to send `progress` now (and, if so, it counts as sent); `force` skips the time throttle only. */
  shouldSend(progress: TrainingProgress, force = false, now = Date.now()): boolean {
    const newer = progress.step > this.signalled.step || (progress.checkpointStep ?? 0) > this.signalled.checkpointStep;
    if (!newer || (!force && now - this.lastAt < this.everyMs)) return false;
    this.lastAt = now;
    this.signalled.step = Math.max(this.signalled.step, progress.step);
    this.signalled.checkpointStep = Math.max(this.signalled.checkpointStep, progress.checkpointStep ?? 0);
    return true;
  }
}
