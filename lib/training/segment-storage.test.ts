import { describe, expect, it } from 'vitest';
import { localSegmentStorage } from './segment-storage';

describe('localSegmentStorage', () => {
  it('trains in the run directory itself: nothing to pull, local checkpoint paths, the environment stage’s worktrees', async () => {
    const storage = localSegmentStorage('/data/run-1');
    expect(storage.runDir).toBe('/data/run-1');
    await expect(storage.pull()).resolves.toBeNull();
    expect(storage.checkpointRef({ step: 4, path: '/data/run-1/training/checkpoints/step-4' })).toBe(
      '/data/run-1/training/checkpoints/step-4',
    );
    expect(storage.checkpointRef(null)).toBeNull();
    await expect(storage.sampleWorktrees('/data/run-1/environment/samples.parquet', new AbortController().signal)).resolves.toBeNull();
    await expect(storage.finish()).resolves.toBeUndefined();
  });
});
