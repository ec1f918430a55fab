import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ResolvedTrainingConfigSchema } from '../../schemas/training/config';
import { buildEnvFixture, type EnvFixture } from '../../test/fixtures/envserver/fixture';
import { isHeld } from '../worktrees/holds';
import { segmentDir } from './layout';
import { setUpSegment } from './segment-setup';

let fixture: EnvFixture;
const runDir = mkdtempSync(path.join(os.tmpdir(), 'codegrep-segment-setup-'));
beforeAll(async () => {
  fixture = await buildEnvFixture();
  mkdirSync(segmentDir(runDir, 0), { recursive: true }); // the activity makes it before the set-up
});
afterAll(() => {
  fixture?.cleanup();
  rmSync(runDir, { recursive: true, force: true });
});

const training = ResolvedTrainingConfigSchema.parse({ modelDir: '/no/model', steps: 2, gpuTaskQueue: 'q' });
const input = () => ({ runDir, segment: 0, totalSteps: 2, samplesUri: fixture.samples.uri, training });

describe('setUpSegment', () => {
  it("holds the samples' worktrees while the segment runs, so a disk budget cannot prune one under an episode", async () => {
    const worktrees = Object.values(fixture.worktrees);
    expect(worktrees.length).toBeGreaterThan(0);
    for (const worktree of worktrees) expect(await isHeld(worktree)).toBe(false);
    const setup = await setUpSegment(input(), () => undefined);
    try {
      for (const worktree of worktrees) expect(await isHeld(worktree)).toBe(true);
      expect(setup.hold.paths.sort()).toEqual(worktrees.map((w) => path.resolve(w)).sort());
    } finally {
      await setup.server.close();
      await setup.hold.release();
    }
    for (const worktree of worktrees) expect(await isHeld(worktree)).toBe(false);
  });

  it('releases the hold when the set-up fails after taking it', async () => {
    // The attempt files go into the segment folder: a run dir that is a file makes that step fail.
    const blocked = path.join(runDir, 'not-a-dir');
    writeFileSync(blocked, 'a file');
    await expect(setUpSegment({ ...input(), runDir: blocked }, () => undefined)).rejects.toThrow();
    for (const worktree of Object.values(fixture.worktrees)) expect(await isHeld(worktree)).toBe(false);
  });
});
