import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RftConfigSchema } from '../../schemas/rft';
import { ResolvedTrainingConfigSchema } from '../../schemas/training/config';
import { buildEnvFixture, type EnvFixture } from '../../test/fixtures/envserver/fixture';
import { reply, startScriptedOpenAiServer } from '../../test/support/scripted-openai-server';
import { isHeld } from '../worktrees/holds';
import { sampleRftShard } from './sample-shard';

let fixture: EnvFixture;
const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-rft-sample-'));
beforeAll(async () => {
  fixture = await buildEnvFixture();
});
afterAll(() => {
  fixture?.cleanup();
  rmSync(work, { recursive: true, force: true });
});

describe('sampleRftShard', () => {
  it("holds the shard's worktrees while the teacher's episodes run in them, and releases them after", async () => {
    const worktrees = Object.values(fixture.worktrees);
    const heldDuringRequests: boolean[] = [];
    const teacher = await startScriptedOpenAiServer({
      script: async () => {
        for (const worktree of worktrees) heldDuringRequests.push(await isHeld(worktree));
        return reply.text('<answer>{"files": ["widgets/gears.py"]}</answer>');
      },
    });
    try {
      const ids = Object.keys(fixture.worktrees);
      const sampled = await sampleRftShard({
        logDir: path.join(work, 'log'),
        shardName: 'rollouts',
        samplesUri: fixture.samples.uri,
        instanceIds: ids,
        options: {
          endpoint: { baseUrl: teacher.baseUrl, model: 'teacher' },
          teacher: 'teacher',
          rft: RftConfigSchema.parse({ instances: ids, teacher: { baseUrl: teacher.baseUrl, model: 'teacher' } }),
          training: ResolvedTrainingConfigSchema.parse({ modelDir: '/no/model', steps: 2, gpuTaskQueue: 'q' }),
          signal: new AbortController().signal,
        },
      });
      expect(sampled.rows.map((r) => r.instanceId)).toEqual(ids);
      expect(heldDuringRequests.length).toBeGreaterThanOrEqual(worktrees.length);
      expect(heldDuringRequests.every(Boolean)).toBe(true);
    } finally {
      await teacher.close();
    }
    for (const worktree of worktrees) expect(await isHeld(worktree)).toBe(false);
  });
});
