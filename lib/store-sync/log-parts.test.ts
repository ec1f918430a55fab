import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fileStoreUri, openArtifactStore, type ArtifactStore } from '../artifacts/store';
import { storeTraining } from './layout';
import { logPartKey, readLogParts, usableLogParts } from './log-parts';
import { SegmentMirror, loggedSteps } from './run-mirror';

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-log-parts-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
let n = 0;
const fresh = (name: string) => path.join(work, `${++n}-${name}`);
const stepLine = (step: number) => `${JSON.stringify({ event: 'step', step, reward_mean: 0.25 })}\n`;

/** A store that counts the reads of each key. */
function countingStore(dir: string): { store: ArtifactStore; reads: Map<string, number> } {
  const plain = openArtifactStore(fileStoreUri(dir));
  const reads = new Map<string, number>();
  return {
    reads,
    store: { ...plain, getBytes: async (key) => (reads.set(key, (reads.get(key) ?? 0) + 1), plain.getBytes(key)) },
  };
}

describe('segment logs as appended parts', () => {
  it('each push uploads only the lines since the last one; a fresh node reads every part once, in order', async () => {
    const { store, reads } = countingStore(fresh('store'));
    const nodeB = fresh('node-b');
    const seg = path.join(nodeB, 'training/segments/segment-0001');
    mkdirSync(seg, { recursive: true });
    const stdout = path.join(seg, 'attempt-01.stdout.jsonl');
    const mirror = new SegmentMirror({ store, runId: 'r', localRunDir: nodeB, segment: 1, attempt: 1, startedAt: 1 });
    await mirror.pull();
    const grew: number[] = [];
    for (let step = 1; step <= 12; step++) {
      const lines = stepLine(step);
      writeFileSync(stdout, lines, { flag: 'a' });
      grew.push(Buffer.byteLength(lines));
      await mirror.flush();
    }
    expect(mirror.traffic.map((r) => r.logBytes)).toEqual(grew);
    const prefix = storeTraining('r').logParts(1, 'attempt-01.stdout.jsonl');
    const listed = await store.list(prefix);
    expect(listed.map((o) => o.bytes)).toEqual(grew);

    // Node C (attempt 2) resumes: attempt 1's log is the parts concatenated, each read once, in order.
    const nodeC = fresh('node-c');
    reads.clear();
    const mirrorC = new SegmentMirror({ store, runId: 'r', localRunDir: nodeC, segment: 1, attempt: 2, startedAt: 2 });
    expect((await mirrorC.pull()).logs).toEqual(['attempt-01.stdout.jsonl']);
    const pulled = readFileSync(path.join(nodeC, 'training/segments/segment-0001/attempt-01.stdout.jsonl'), 'utf8');
    expect(pulled).toBe(readFileSync(stdout, 'utf8'));
    expect(loggedSteps(pulled)).toBe(12);
    const partReads = [...reads].filter(([key]) => key.startsWith(prefix));
    expect(partReads.map(([key]) => key)).toEqual(listed.map((o) => o.key));
    expect(partReads.every(([, count]) => count === 1)).toBe(true);
    // C does not send attempt 1's log back.
    await mirrorC.flush();
    expect(mirrorC.traffic.at(-1)!.logBytes).toBe(0);
    expect(await store.list(prefix)).toEqual(listed);
  });

  it('a line cut between two pushes is whole once both parts are read', async () => {
    const store = openArtifactStore(fileStoreUri(fresh('store')));
    const node = fresh('node');
    const seg = path.join(node, 'training/segments/segment-0001');
    mkdirSync(seg, { recursive: true });
    const stdout = path.join(seg, 'attempt-01.stdout.jsonl');
    const mirror = new SegmentMirror({ store, runId: 'r', localRunDir: node, segment: 1, attempt: 1, startedAt: 1 });
    const line = stepLine(7);
    writeFileSync(stdout, stepLine(6) + line.slice(0, 10));
    await mirror.flush();
    writeFileSync(stdout, line.slice(10), { flag: 'a' });
    await mirror.flush();
    const log = await readLogParts(store, storeTraining('r').logParts(1, 'attempt-01.stdout.jsonl'));
    expect(log!.parts).toBe(2);
    expect(log!.bytes.toString('utf8')).toBe(stepLine(6) + line);
    expect(loggedSteps(log!.bytes.toString('utf8'))).toBe(7);
  });

  it('a half-written last part is left out, a gap ends the log, and a retried part supersedes the one it repeats', async () => {
    const store = openArtifactStore(fileStoreUri(fresh('store')));
    const prefix = 'logs/a.jsonl/';
    const put = (seq: number, offset: number, length: number, text: string) =>
      store.putBytes(logPartKey(prefix, { seq, offset, length }), text);
    await put(1, 0, 4, 'aaa\n');
    await put(2, 4, 2, 'b'); // the first try of part 2, answered with an error after it landed
    await put(2, 4, 4, 'bbb\n'); // its retry, with the lines written since
    await put(3, 8, 6, 'cc'); // cut short: 2 of its 6 bytes
    expect((await readLogParts(store, prefix))!).toEqual({ bytes: Buffer.from('aaa\nbbb\n'), parts: 2, nextSeq: 3 });
    // The writer continues at part 3 from byte 8: its whole part replaces the torn one.
    await put(3, 8, 4, 'ccc\n');
    await put(5, 16, 4, 'eee\n'); // after a gap (no part 4): unreachable
    expect((await readLogParts(store, prefix))!.bytes.toString('utf8')).toBe('aaa\nbbb\nccc\n');
    expect(usableLogParts(await store.list(prefix), prefix).map((p) => [p.seq, p.offset, p.length])).toEqual([
      [1, 0, 4],
      [2, 4, 4],
      [3, 8, 4],
    ]);
    expect(await readLogParts(store, 'logs/none/')).toBeNull();
  });

  it('a log stored whole (before logs were parts) is still pulled; the parts pushed after it hold the whole log', async () => {
    const store = openArtifactStore(fileStoreUri(fresh('store')));
    await store.putBytes('r/training/segments/segment-0001/attempt-01.stdout.jsonl', stepLine(1) + stepLine(2));
    const node = fresh('node');
    const mirror = new SegmentMirror({ store, runId: 'r', localRunDir: node, segment: 1, attempt: 2, startedAt: 2 });
    expect((await mirror.pull()).logs).toEqual(['attempt-01.stdout.jsonl']);
    const local = path.join(node, 'training/segments/segment-0001/attempt-01.stdout.jsonl');
    expect(readFileSync(local, 'utf8')).toBe(stepLine(1) + stepLine(2));
    writeFileSync(local, stepLine(3), { flag: 'a' });
    await mirror.flush();
    const log = await readLogParts(store, storeTraining('r').logParts(1, 'attempt-01.stdout.jsonl'));
    expect(log!.bytes.toString('utf8')).toBe(stepLine(1) + stepLine(2) + stepLine(3));
  });
});
