import type { TrainingHeartbeat, TrainingProgress } from '../../schemas/training/activity-io';
import type { SegmentState } from './trainer-events';

/**
 * A running segment's progress: its heartbeat details (the newest step and checkpoint, and what was signalled)
 * and its `trainingProgress` signals to the workflow. Each signal costs the workflow about 4 history events, so
 * one goes out only when the step or the checkpoint step passed the newest one signalled for this segment (by
 * any attempt: `signalled` lives in the heartbeat details), and steps at most every `everyMs`. A segment of
 * `segmentSteps` steps therefore sends at most 2 × segmentSteps signals however long it runs or retries.
 */
export class SegmentProgress {
  private lastSignalAt = 0;

  constructor(
    /** The heartbeat details, carried from the previous attempt on a retry. */
    private readonly beat: TrainingHeartbeat,
    private readonly segment: number,
    private readonly everyMs: number,
    private readonly out: { heartbeat(details: TrainingHeartbeat): void; signal: ((progress: TrainingProgress) => void) | null },
  ) {}

  heartbeat(): void {
    this.out.heartbeat({ ...this.beat, signalled: { ...this.beat.signalled } });
  }

  /** Heartbeats `state`; signals it too when asked (`now`: a checkpoint or the end, past the time throttle). */
  report(state: Pick<SegmentState, 'step' | 'checkpoint' | 'checkpointStep' | 'latest'>, signal: 'now' | 'throttled' | null): void {
    this.beat.step = state.step;
    this.beat.checkpoint = state.checkpoint;
    this.heartbeat();
    if (!signal || !this.out.signal) return;
    const progress: TrainingProgress = {
      segment: this.segment,
      step: state.step,
      checkpointStep: state.checkpointStep,
      latest: state.latest,
    };
    const signalled = this.beat.signalled;
    const newer = progress.step > signalled.step || (progress.checkpointStep ?? 0) > signalled.checkpointStep;
    const now = Date.now();
    if (!newer || (signal === 'throttled' && now - this.lastSignalAt < this.everyMs)) return;
    this.lastSignalAt = now;
    signalled.step = Math.max(signalled.step, progress.step);
    signalled.checkpointStep = Math.max(signalled.checkpointStep, progress.checkpointStep ?? 0);
    this.out.signal(progress);
  }
}
