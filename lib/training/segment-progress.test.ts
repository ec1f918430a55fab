import { describe, expect, it } from 'vitest';
import type { TrainingHeartbeat, TrainingProgress } from '../../schemas/training/activity-io';
import { SegmentProgress } from './segment-progress';

const at = (step: number, checkpointStep: number | null = null) => ({
  step,
  checkpoint: checkpointStep === null ? null : `c${checkpointStep}`,
  checkpointStep,
  latest: null,
});

describe('SegmentProgress', () => {
  it('heartbeats every report, signals only newer progress, steps at most every everyMs, checkpoints at once', () => {
    const beats: TrainingHeartbeat[] = [];
    const signals: TrainingProgress[] = [];
    const beat: TrainingHeartbeat = { step: 4, checkpoint: null, signalled: { step: 4, checkpointStep: 0 } };
    const progress = new SegmentProgress(beat, 2, 60_000, { heartbeat: (d) => beats.push(d), signal: (p) => signals.push(p) });
    progress.report(at(4), 'throttled'); // already signalled by an earlier attempt
    progress.report(at(5), 'throttled');
    progress.report(at(6), 'throttled'); // within everyMs of the last signal
    progress.report(at(6, 6), 'now');
    expect(beats.map((b) => [b.step, b.checkpoint])).toEqual([
      [4, null],
      [5, null],
      [6, null],
      [6, 'c6'],
    ]);
    expect(signals.map((s) => [s.segment, s.step, s.checkpointStep])).toEqual([
      [2, 5, null],
      [2, 6, 6],
    ]);
    expect(beat.signalled).toEqual({ step: 6, checkpointStep: 6 }); // carried to a retry in the heartbeat details
  });

  it('without a workflow to signal it only heartbeats, and records nothing as signalled', () => {
    const beat: TrainingHeartbeat = { step: 0, checkpoint: null, signalled: { step: 0, checkpointStep: 0 } };
    new SegmentProgress(beat, 1, 0, { heartbeat: () => undefined, signal: null }).report(at(3, 3), 'now');
    expect(beat).toEqual({ step: 3, checkpoint: 'c3', signalled: { step: 0, checkpointStep: 0 } });
  });
});
