import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { diskSummary, runDiskSummary } from './disk-summary';
import { diskUsage } from './disk-usage';
import { materializeAll } from './materialize';
import { bareMirror, createSyntheticRepo, type SyntheticRepo } from './synthetic-repo';

// The environment summary reports the run's own disk beside the shared folders' (which hold every run's trees).
let root: string;
let widgets: SyntheticRepo;
let gadgets: SyntheticRepo;

beforeAll(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), 'codegrep-run-disk-'));
  [widgets, gadgets] = await Promise.all([
    createSyntheticRepo(path.join(root, 'src', 'widgets'), { files: 20, commits: 5 }),
    createSyntheticRepo(path.join(root, 'src', 'gadgets'), { files: 5, commits: 2 }),
  ]);
  await bareMirror(widgets.dir, path.join(root, 'mirrors', 'acme__widgets.git'));
  await bareMirror(gadgets.dir, path.join(root, 'mirrors', 'acme__gadgets.git'));
});
afterAll(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

describe('runDiskSummary', () => {
  it("counts only this run's worktrees and the bare repositories they use, not the shared folders' others", async () => {
    const d = {
      cacheDir: path.join(root, 'cache'),
      worktreesDir: path.join(root, 'worktrees'),
      source: { kind: 'mirror-dir' as const, dir: path.join(root, 'mirrors') },
    };
    // An earlier run: four widgets commits and a gadgets one.
    await materializeAll(
      [
        ...widgets.commits.slice(0, 4).map((commit) => ({ repo: 'acme/widgets', commit })),
        { repo: 'acme/gadgets', commit: gadgets.commits[0]! },
      ],
      d,
    );
    // This run: one commit it shares with the earlier run, one new one, the same commit twice, and a failure.
    const results = await materializeAll(
      [
        { repo: 'acme/widgets', commit: widgets.commits[0]! },
        { repo: 'acme/widgets', commit: widgets.commits[4]! },
        { repo: 'acme/widgets', commit: widgets.commits[4]! },
        { repo: 'acme/absent', commit: widgets.commits[0]! },
      ],
      d,
    );
    const run = await runDiskSummary(results, d);
    const shared = await diskSummary(d);
    const mine = [results[0]!, results[1]!];
    expect(run.worktrees).toBe(2);
    expect(run.worktreeBytes).toBe(mine[0]!.bytes + mine[1]!.bytes);
    expect(run.worktreeBytes).toBeGreaterThan(0);
    expect(run.repos).toBe(1);
    expect(run.bareBytes).toBe(await diskUsage(path.join(d.cacheDir, 'acme__widgets.git')));
    // The shared folders hold the other run's trees as well.
    expect(shared.worktrees).toBe(6);
    expect(shared.worktreeBytes).toBeGreaterThan(run.worktreeBytes * 2);
    expect(shared.bareBytes).toBeGreaterThan(run.bareBytes);
  });
});
