import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RepoSource } from '../../schemas/worktrees';
import { enforceWorktreeBudget, listWorktreeUsage, type BudgetResult } from './budget';
import { git } from './git';
import { holdWorktrees, isHeld } from './holds';
import { WORKTREE_MARKER } from './layout';
import { materializeAll } from './materialize';
import { pruneWorktrees } from './prune';
import { parseRepoName } from './repo-name';
import { bareMirror, createSyntheticRepo, type SyntheticRepo } from './synthetic-repo';
import { ensureWorktree, listWorktrees } from './worktree';

// environment.maxWorktreeBytes: least recently used idle worktrees go first; a held one never does.
let root: string;
let widgets: SyntheticRepo;
let source: RepoSource;
const T = { timeoutMs: 30_000 };

beforeAll(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), 'codegrep-budget-'));
  widgets = await createSyntheticRepo(path.join(root, 'src', 'widgets'), { files: 20, commits: 6 });
  await bareMirror(widgets.dir, path.join(root, 'mirrors', 'acme__widgets.git'));
  source = { kind: 'mirror-dir', dir: path.join(root, 'mirrors') };
});
afterAll(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

let caseNo = 0;
const dirs = () => {
  const base = path.join(root, `case-${++caseNo}`);
  return { cacheDir: path.join(base, 'cache'), worktreesDir: path.join(base, 'worktrees') };
};

/** Sets a worktree's last use (its completion marker's mtime) to `secondsAgo` before now. */
async function lastUsed(wt: string, secondsAgo: number): Promise<void> {
  const adminDir = (await git(['rev-parse', '--absolute-git-dir'], { ...T, cwd: wt })).trim();
  const at = new Date(Date.now() - secondsAgo * 1000);
  await fs.utimes(path.join(adminDir, WORKTREE_MARKER), at, at);
}

describe('the worktree disk budget', () => {
  it('removes the least recently used idle worktrees until the rest fit, never a held one', async () => {
    const d = dirs();
    const made = [];
    for (const commit of widgets.commits.slice(0, 5)) made.push(await ensureWorktree('acme/widgets', commit, { ...d, source }));
    // Last used: 0 oldest … 4 newest; 0 is held by an activity.
    for (const [i, w] of made.entries()) await lastUsed(w.path, 1000 - i * 100);
    // Held the way an evaluation shard holds its worktrees: by path alone (the lock found through its .git).
    const hold = await holdWorktrees([made[0]!.path]);
    expect(await isHeld(made[0]!.path)).toBe(true);

    const per = made[0]!.bytes;
    expect(per).toBeGreaterThan(0);
    const total = made.reduce((s, w) => s + w.bytes, 0);
    const r = await enforceWorktreeBudget({ ...d, maxBytes: total - per - 1 }); // two must go
    expect(r.bytesBefore).toBe(total);
    expect(r.removed.map((x) => x.commit)).toEqual([made[1]!.commit, made[2]!.commit]);
    expect(r.bytesAfter).toBe(total - made[1]!.bytes - made[2]!.bytes);
    expect(r.overBudget).toBe(false);
    // Gone from disk and from git's worktree list; the held one and the recent ones are intact.
    await expect(fs.access(made[1]!.path)).rejects.toThrow();
    const listed = (await listWorktrees(path.join(d.cacheDir, 'acme__widgets.git'), parseRepoName('acme/widgets'), {})).map((w) => w.path);
    expect(listed.sort()).toEqual([made[0]!.path, made[3]!.path, made[4]!.path].sort());

    // Everything left is held or too recent to matter: a budget below the held one's size removes all idle
    // ones and reports that it is still over.
    const all = await enforceWorktreeBudget({ ...d, maxBytes: 1 });
    expect(all.removed.map((x) => x.commit)).toEqual([made[3]!.commit, made[4]!.commit]);
    expect(all.overBudget).toBe(true);
    expect((await listWorktreeUsage(d.worktreesDir)).map((w) => w.commit)).toEqual([made[0]!.commit]);

    // `codegrep worktrees prune` keeps it too while it is held.
    const pruned = await pruneWorktrees(d);
    expect(pruned.removed).toEqual([]);
    expect(pruned.kept).toBe(1);

    // Released, it goes as well; a hold whose process is gone counts for nothing.
    await hold.release();
    expect(await isHeld(made[0]!.path)).toBe(false);
    const dead = path.join(d.worktreesDir, '.holds', 'acme__widgets', made[0]!.commit);
    await fs.mkdir(dead, { recursive: true });
    await fs.writeFile(
      path.join(dead, 'gone.json'),
      JSON.stringify({ pid: 2 ** 22 + 12345, hostname: (await import('node:os')).hostname() }),
    );
    expect(await isHeld(made[0]!.path)).toBe(false);
    const last = await enforceWorktreeBudget({ ...d, maxBytes: 1 });
    expect(last.removed.map((x) => x.commit)).toEqual([made[0]!.commit]);
    expect(last.overBudget).toBe(false);
  });

  it('materializeAll keeps under maxWorktreeBytes as it goes, without pruning its own worktrees', async () => {
    const d = dirs();
    // Another run's worktree, idle, and one that an activity holds.
    const idle = await ensureWorktree('acme/widgets', widgets.commits[5]!, { ...d, source });
    const busy = await ensureWorktree('acme/widgets', widgets.commits[4]!, { ...d, source });
    await lastUsed(idle.path, 500);
    await lastUsed(busy.path, 600);
    const hold = await holdWorktrees([busy.path], d);
    const budgets: BudgetResult[] = [];
    const requests = widgets.commits.slice(0, 3).map((commit) => ({ repo: 'acme/widgets', commit }));
    const rows = await materializeAll(requests, { ...d, source, maxWorktreeBytes: 3.5 * idle.bytes, onBudget: (r) => budgets.push(r) });
    expect(rows.map((r) => r.status)).toEqual(['created', 'created', 'created']);
    // The idle one went; the held one and this call's three stayed (over the budget, and said so).
    const removed = budgets.flatMap((b) => b.removed.map((x) => x.path));
    expect(removed).toEqual([idle.path]);
    expect(budgets.at(-1)!.overBudget).toBe(true);
    for (const row of rows) await expect(fs.access(row.path)).resolves.toBeUndefined();
    await expect(fs.access(busy.path)).resolves.toBeUndefined();
    // Its own holds are gone once it returns; the other activity's stays.
    expect(await isHeld(rows[0]!.path)).toBe(false);
    expect(await isHeld(busy.path)).toBe(true);
    await hold.release();
    await expect(fs.access(path.join(d.worktreesDir, '.holds'))).rejects.toThrow();
  });
});
