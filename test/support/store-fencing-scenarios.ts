import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { readDirectoryMarker, type ArtifactStore } from '../../lib/artifacts/store';
import {
  FencedWriterError,
  LeaseHeldByNewerAttemptError,
  RunLease,
  SegmentMirror,
  newestFenceEntry,
  storedCheckpointSteps,
  storeTraining,
} from '../../lib/store-sync';

/**
 * The run lease's two-writer cases (lib/store-sync/fencing.ts), the same against every store kind: the
 * `file://` store in the unit tests, SeaweedFS in test/integration/store-fencing.test.ts. `openStore` gives
 * a fresh, empty store each call.
 */
export function fencingScenarios(openStore: () => ArtifactStore | Promise<ArtifactStore>): void {
  const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-fencing-'));
  let n = 0;
  const token = (attempt: number, segment = 1) => ({ segment, attempt, startedAt: 1_700_000_000_000 + attempt });

  /** A node's run dir with complete checkpoints `steps` and attempt `attempt`'s stdout recording them. */
  function node(name: string, attempt: number, steps: number[]): string {
    const runDir = path.join(work, `${++n}-${name}`, 'run');
    for (const step of steps) {
      const dir = path.join(runDir, 'training', 'trainer', 'checkpoints', `step-${String(step).padStart(8, '0')}`);
      mkdirSync(dir, { recursive: true });
      writeFileSync(path.join(dir, 'adapter_model.safetensors'), `weights of step ${step} by ${name}`);
      writeFileSync(path.join(dir, 'COMPLETE'), '');
    }
    const seg = path.join(runDir, 'training', 'segments', 'segment-0001');
    mkdirSync(seg, { recursive: true });
    const lines = steps.map((step) => `${JSON.stringify({ event: 'step', step })}\n`).join('');
    writeFileSync(path.join(seg, `attempt-${String(attempt).padStart(2, '0')}.stdout.jsonl`), lines);
    return runDir;
  }

  it('writer A acquires, writer B acquires (newer): A’s marker publish is refused with FencedWriterError and does not appear; B’s does', async () => {
    const store = await openStore();
    const runId = `fence-${++n}`;
    const keys = storeTraining(runId);
    const a = await RunLease.acquire(store, runId, token(1));
    await a.publishMarker(keys.marker(1), { step: 1, by: 'A' });
    const b = await RunLease.acquire(store, runId, token(2));
    expect(b.generation).toBeGreaterThan(a.generation);

    const refused = await a.publishMarker(keys.marker(2), { step: 2, by: 'A' }).then(
      () => null,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(FencedWriterError);
    expect((refused as FencedWriterError).name).toBe('FencedWriterError');
    expect((refused as FencedWriterError).message).toMatch(/segment 1 attempt 1 .*fenced by segment 1 attempt 2/);
    expect((refused as FencedWriterError).newer?.generation).toBe(b.generation);
    expect(await store.head(keys.marker(2))).toBeNull();
    expect(a.fenced).toBe(true);
    await expect(a.check('pushing logs')).rejects.toThrow(FencedWriterError);

    await b.publishMarker(keys.marker(2), { step: 2, by: 'B' });
    expect(JSON.parse((await store.getBytes(keys.marker(2)))!.toString('utf8'))).toEqual({ step: 2, by: 'B' });
    expect((await newestFenceEntry(store, runId))!).toMatchObject({ kind: 'publish', generation: b.generation, holder: token(2) });
    // An older attempt that wakes up late cannot take the lease back.
    await expect(RunLease.acquire(store, runId, token(1))).rejects.toThrow(LeaseHeldByNewerAttemptError);
  });

  it('two segment mirrors: the older attempt’s checkpoint push after the newer attempt started is refused; the newer one’s lands', async () => {
    const store = await openStore();
    const runId = `fence-${++n}`;
    const nodeA = node('node-a', 1, [1]);
    const mirrorA = new SegmentMirror({ store, runId, localRunDir: nodeA, segment: 1, attempt: 1, startedAt: 1000 });
    await mirrorA.pull();
    await mirrorA.flush();
    expect(await storedCheckpointSteps(store, runId)).toEqual([1]);

    // Attempt 2 starts on node B (A is cut off, still training): it takes the lease and resumes from step 1.
    const nodeB = node('node-b', 2, []);
    const mirrorB = new SegmentMirror({ store, runId, localRunDir: nodeB, segment: 1, attempt: 2, startedAt: 2000 });
    expect((await mirrorB.pull()).checkpointStep).toBe(1);

    // A reaches step 2 and pushes: refused, nothing of it is committed.
    writeFileSync(
      path.join(nodeA, 'training/segments/segment-0001/attempt-01.stdout.jsonl'),
      `${JSON.stringify({ event: 'step', step: 2 })}\n`,
      {
        flag: 'a',
      },
    );
    mkdirSync(path.join(nodeA, 'training/trainer/checkpoints/step-00000002'), { recursive: true });
    writeFileSync(path.join(nodeA, 'training/trainer/checkpoints/step-00000002/adapter_model.safetensors'), 'weights of step 2 by A');
    writeFileSync(path.join(nodeA, 'training/trainer/checkpoints/step-00000002/COMPLETE'), '');
    await expect(mirrorA.flush()).rejects.toThrow(FencedWriterError);
    expect(await storedCheckpointSteps(store, runId)).toEqual([1]);

    // B reaches step 2: its marker lands, naming B's lease generation.
    writeFileSync(
      path.join(nodeB, 'training/segments/segment-0001/attempt-02.stdout.jsonl'),
      `${JSON.stringify({ event: 'step', step: 2 })}\n`,
    );
    mkdirSync(path.join(nodeB, 'training/trainer/checkpoints/step-00000002'), { recursive: true });
    writeFileSync(path.join(nodeB, 'training/trainer/checkpoints/step-00000002/adapter_model.safetensors'), 'weights of step 2 by B');
    writeFileSync(path.join(nodeB, 'training/trainer/checkpoints/step-00000002/COMPLETE'), '');
    await mirrorB.flush();
    expect(await storedCheckpointSteps(store, runId)).toEqual([1, 2]);
    const marker = await readDirectoryMarker(store, storeTraining(runId).marker(2));
    expect(marker!.extra).toMatchObject({ step: 2, generation: mirrorB.leaseGeneration });
    const weights = await store.getBytes(`${storeTraining(runId).checkpoint(2)}/adapter_model.safetensors`);
    expect(weights!.toString('utf8')).toBe('weights of step 2 by B');
    // A, once fenced, pushes nothing more.
    await expect(mirrorA.flush()).rejects.toThrow(FencedWriterError);
  });

  it('writers racing for the same fence entry: exactly one create succeeds; racing acquires get distinct generations', async () => {
    const store = await openStore();
    for (let round = 0; round < 5; round++) {
      const key = `race/${round}.json`;
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => store.putBytesIfAbsent(key, `writer ${i}\n`)));
      expect(results.filter(Boolean)).toHaveLength(1);
      expect((await store.getBytes(key))!.toString('utf8')).toBe(`writer ${results.indexOf(true)}\n`);
    }

    const runId = `fence-${++n}`;
    const leases = await Promise.all(Array.from({ length: 4 }, () => RunLease.acquire(store, runId, token(1))));
    expect(new Set(leases.map((l) => l.generation)).size).toBe(4);
  });
}
