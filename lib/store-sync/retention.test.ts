import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fileStoreUri, openArtifactStore, type ArtifactStore } from '../artifacts/store';
import { storeTraining } from './layout';
import { SegmentMirror, storedCheckpointSteps } from './run-mirror';
import { checkpointsToDelete } from './retention';

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-retention-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('checkpointsToDelete', () => {
  it('keeps the newest keepCheckpoints, every keepSteps step and the best step', () => {
    const steps = [5, 1, 2, 3, 4, 6];
    expect(checkpointsToDelete(steps, { keepCheckpoints: 2 })).toEqual([1, 2, 3, 4]);
    expect(checkpointsToDelete(steps, { keepCheckpoints: 2, keepSteps: [2, 99] })).toEqual([1, 3, 4]);
    expect(checkpointsToDelete(steps, { keepCheckpoints: 2, bestStep: 1 })).toEqual([2, 3, 4]);
    expect(checkpointsToDelete(steps, { keepCheckpoints: 2, keepSteps: new Set([3]), bestStep: 1 })).toEqual([2, 4]);
    expect(checkpointsToDelete(steps, { keepCheckpoints: 2, bestStep: null })).toEqual([1, 2, 3, 4]);
    expect(checkpointsToDelete(steps, { keepCheckpoints: 10 })).toEqual([]);
    expect(() => checkpointsToDelete(steps, { keepCheckpoints: 0 })).toThrow(/keepCheckpoints must be a positive integer, got 0/);
  });
});

describe('retention in the store', () => {
  it('after each marker, checkpoints beyond keepCheckpoints leave the store (marker before files); the best step stays', async () => {
    const storeDir = path.join(work, 'store');
    const plain = openArtifactStore(fileStoreUri(storeDir));
    const deleted: string[] = [];
    const store: ArtifactStore = { ...plain, delete: async (key) => (deleted.push(key), plain.delete(key)) };
    const runDir = path.join(work, 'node', 'run');
    const seg = path.join(runDir, 'training/segments/segment-0001');
    mkdirSync(seg, { recursive: true });
    let best = 1;
    const mirror = new SegmentMirror({
      store,
      runId: 'r',
      localRunDir: runDir,
      segment: 1,
      attempt: 1,
      startedAt: 1,
      keepCheckpoints: 2,
      keepSteps: () => ({ bestStep: best }),
    });
    await mirror.pull();
    for (let step = 1; step <= 6; step++) {
      const dir = path.join(runDir, 'training/trainer/checkpoints', `step-${String(step).padStart(8, '0')}`);
      mkdirSync(dir, { recursive: true });
      writeFileSync(path.join(dir, 'adapter_model.safetensors'), `w${step}`);
      writeFileSync(path.join(dir, 'optimizer.pt'), `o${step}`);
      writeFileSync(path.join(dir, 'COMPLETE'), '');
      writeFileSync(path.join(seg, 'attempt-01.stdout.jsonl'), `${JSON.stringify({ event: 'step', step })}\n`, { flag: 'a' });
      if (step === 4) best = 3; // validation found a better one
      await mirror.flush();
    }
    const keys = storeTraining('r');
    // Step 1 was the best until step 4's push, then 3: steps 1 and 2 went with that push, 4 with step 6's; 3 stays.
    expect(await storedCheckpointSteps(plain, 'r')).toEqual([3, 5, 6]);
    for (const step of [1, 2, 4]) {
      expect(await plain.list(`${keys.checkpoint(step)}/`)).toEqual([]);
      const markerAt = deleted.indexOf(keys.marker(step));
      expect(markerAt).toBeGreaterThanOrEqual(0);
      const fileIndexes = deleted.flatMap((key, i) => (key.startsWith(`${keys.checkpoint(step)}/`) ? [i] : []));
      expect(fileIndexes).toHaveLength(3);
      expect(Math.min(...fileIndexes)).toBeGreaterThan(markerAt);
    }
    for (const step of [3, 5, 6]) expect((await plain.list(`${keys.checkpoint(step)}/`)).length).toBe(3);
    expect(mirror.traffic.reduce((sum, round) => sum + round.deletedCheckpoints, 0)).toBe(3);
  });

  it('without keepCheckpoints the store keeps as many as the trainer does (3)', async () => {
    const store = openArtifactStore(fileStoreUri(path.join(work, 'store-default')));
    const runDir = path.join(work, 'node-default', 'run');
    const seg = path.join(runDir, 'training/segments/segment-0001');
    mkdirSync(seg, { recursive: true });
    const mirror = new SegmentMirror({ store, runId: 'r', localRunDir: runDir, segment: 1, attempt: 1, startedAt: 1 });
    for (let step = 1; step <= 5; step++) {
      const dir = path.join(runDir, 'training/trainer/checkpoints', `step-${String(step).padStart(8, '0')}`);
      mkdirSync(dir, { recursive: true });
      writeFileSync(path.join(dir, 'COMPLETE'), '');
      writeFileSync(path.join(seg, 'attempt-01.stdout.jsonl'), `${JSON.stringify({ event: 'step', step })}\n`, { flag: 'a' });
      await mirror.flush();
    }
    expect(await storedCheckpointSteps(store, 'r')).toEqual([3, 4, 5]);
  });
});
