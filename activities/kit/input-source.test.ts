import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inputSource } from './input-source';

let dir = '';
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'input-source-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('inputSource', () => {
  it('returns the ref of a readable input file, keyed by its content', async () => {
    const file = path.join(dir, 'instances.jsonl');
    await writeFile(file, '{"instance_id":"a"}\n');
    const ref = await inputSource('instances', file);
    expect(ref.sha256).toMatch(/^[0-9a-f]{64}$/);
    await writeFile(file, '{"instance_id":"b"}\n');
    expect((await inputSource('instances', file)).sha256).not.toBe(ref.sha256);
  });

  it('a missing file fails non-retryable InvalidInput naming what it is and the path', async () => {
    const missing = path.join(dir, 'nope.jsonl');
    const failure = await inputSource('trajectories', missing).catch((error: unknown) => error);
    expect(failure).toMatchObject({ type: 'InvalidInput', nonRetryable: true });
    expect((failure as Error).message).toMatch(new RegExp(`^trajectories ${missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: `));
  });
});
