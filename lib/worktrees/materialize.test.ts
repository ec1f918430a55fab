import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorktreeResultSchema, type RepoSource } from '../../schemas/worktrees';
import { diskSummary } from './disk-summary';
import { diskUsage } from './disk-usage';
import { git } from './git';
import { materializeAll, type MaterializeProgress } from './materialize';
import { pruneWorktrees } from './prune';
import { parseRepoName, worktreeKey } from './repo-name';
import { bareMirror, createSyntheticRepo, type SyntheticRepo } from './synthetic-repo';
import { listWorktrees } from './worktree';

let root: string;
let widgets: SyntheticRepo;
let gadgets: SyntheticRepo;
let source: RepoSource;

beforeAll(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), 'codegrep-mat-'));
  [widgets, gadgets] = await Promise.all([
    createSyntheticRepo(path.join(root, 'src', 'widgets'), { files: 30, commits: 10 }),
    createSyntheticRepo(path.join(root, 'src', 'gadgets'), { files: 10, commits: 3 }),
  ]);
  await bareMirror(widgets.dir, path.join(root, 'mirrors', 'acme__widgets.git'));
  await bareMirror(gadgets.dir, path.join(root, 'mirrors', 'acme', 'gadgets.git'));
  source = { kind: 'mirror-dir', dir: path.join(root, 'mirrors') };
});
afterAll(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

let caseNo = 0;
function dirs() {
  const base = path.join(root, `case-${++caseNo}`);
  return { cacheDir: path.join(base, 'cache'), worktreesDir: path.join(base, 'worktrees') };
}

describe('materializeAll', () => {
  it('fails every commit of an unreachable URL repository with the first fetch error, asking once', async () => {
    const d = dirs();
    const t0 = performance.now();
    const requests = widgets.commits.slice(0, 4).map((commit) => ({ repo: 'acme/typo', commit }));
    const rows = await materializeAll(requests, { ...d, source: { kind: 'url', template: 'file:///nonexistent/{repo}.git' } });
    expect(performance.now() - t0).toBeLessThan(10_000);
    expect(rows.map((r) => r.status)).toEqual(Array(4).fill('failed'));
    expect(new Set(rows.map((r) => r.error)).size).toBe(1);
    expect(rows[0]!.error).toMatch(/acme\/typo.*cannot be reached.*environment\.repoSource/);
    // The later commits were refused without running git: no time spent on them.
    expect(rows.slice(1).every((r) => r.ms === 0)).toBe(true);
  });

  it('materializes many commits of several repos; a failure stays in its row', async () => {
    const d = dirs();
    const requests = [
      ...widgets.commits.map((commit) => ({ repo: 'acme/widgets', commit })),
      ...gadgets.commits.map((commit) => ({ repo: 'acme/gadgets', commit })),
      { repo: 'acme/absent', commit: widgets.commits[0]! },
      { repo: '../evil', commit: widgets.commits[0]! },
      { repo: 'acme/widgets', commit: 'not-a-sha' },
      { repo: 'acme/widgets', commit: 'feedface'.repeat(5) },
      { repo: 'acme/widgets', commit: widgets.commits[0]! }, // a duplicate
    ];
    const progress: MaterializeProgress[] = [];
    const rows = await materializeAll(requests, { ...d, source, concurrencyAcrossRepos: 3, onProgress: (p) => progress.push(p) });

    expect(rows).toHaveLength(requests.length);
    for (const row of rows) WorktreeResultSchema.parse(row);
    const ok = rows.slice(0, 13);
    expect(ok.map((r) => r.status)).toEqual(Array(13).fill('created'));
    for (const [i, row] of ok.slice(0, 10).entries()) {
      expect(row.path).toBe(path.join(d.worktreesDir, 'acme__widgets', widgets.commits[i]!));
      expect((await fs.readFile(path.join(row.path, 'VERSION'), 'utf8')).trim()).toBe(String(i));
      expect(row.bytes).toBeGreaterThan(0);
      expect(row.error).toBeNull();
    }
    const [absent, evil, badSha, missing, dup] = rows.slice(13);
    expect(absent).toMatchObject({ status: 'failed', repo: 'acme/absent' });
    expect(absent!.error).toMatch(/no local mirror of acme\/absent.*environment\.repoSource/);
    expect(evil).toMatchObject({ status: 'failed', path: '' });
    expect(evil!.error).toMatch(/repository name "\.\.\/evil" refused/);
    expect(badSha!.error).toMatch(/commit "not-a-sha" for acme\/widgets refused/);
    expect(missing!.error).toMatch(/commit feedface.* not found in acme\/widgets/);
    expect(dup).toEqual(rows[0]);

    expect(progress).toHaveLength(requests.length);
    expect(progress.map((p) => p.done)).toEqual(requests.map((_, i) => i + 1));
    expect(progress.every((p) => p.total === requests.length)).toBe(true);

    const again = await materializeAll(requests.slice(0, 13), { ...d, source });
    expect(again.map((r) => r.status)).toEqual(Array(13).fill('reused'));
  });

  it("with checkout: false makes no worktree: the bare clone holds each commit and is the row's path", async () => {
    const d = dirs();
    const requests = widgets.commits.slice(0, 3).map((commit) => ({ repo: 'acme/widgets', commit }));
    const rows = await materializeAll(requests, { ...d, source, checkout: false });
    const bare = path.join(d.cacheDir, 'acme__widgets.git');
    expect(rows.map((r) => [r.status, r.path, r.bytes, r.error])).toEqual(Array(3).fill(['reused', bare, 0, null]));
    for (const [i, commit] of widgets.commits.slice(0, 3).entries()) {
      expect((await git(['-C', bare, 'cat-file', 'blob', `${commit}:VERSION`], { timeoutMs: 10_000 })).trim()).toBe(String(i));
    }
    await expect(fs.access(d.worktreesDir)).rejects.toThrow(/ENOENT/);
    const fromUrl = dirs();
    const fetched = await materializeAll(requests.slice(0, 1), {
      ...fromUrl,
      source: { kind: 'url', template: `file://${path.join(root, 'mirrors')}/{owner}__{name}.git` },
      checkout: false,
    });
    expect(fetched[0]).toMatchObject({ status: 'created', path: path.join(fromUrl.cacheDir, 'acme__widgets.git'), error: null });
    await expect(fs.access(fromUrl.worktreesDir)).rejects.toThrow(/ENOENT/);
  });

  it('rejects when aborted', async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(
      materializeAll([{ repo: 'acme/widgets', commit: widgets.commits[0]! }], { ...dirs(), source, signal: controller.signal }),
    ).rejects.toThrow(/aborted/);
  });
});

describe('diskSummary', () => {
  it('counts bare + worktrees like du and compares with N full clones', async () => {
    const d = dirs();
    await materializeAll(
      widgets.commits.slice(0, 6).map((commit) => ({ repo: 'acme/widgets', commit })),
      { ...d, source },
    );
    const s = await diskSummary(d);
    expect(s.worktrees).toBe(6);
    expect(s.repos).toEqual([{ repo: 'acme/widgets', bareBytes: s.bareBytes, worktrees: 6, worktreeBytes: s.worktreeBytes }]);
    // The same two trees through du(1), which also counts each inode once and does not follow symlinks.
    const du = await promisify(execFile)('du', [
      '-s',
      '-B1',
      '-c',
      path.join(d.cacheDir, 'acme__widgets.git'),
      path.join(d.worktreesDir, 'acme__widgets'),
    ]);
    const duTotal = Number(du.stdout.trim().split('\n').at(-1)!.split('\t')[0]);
    const worktreesParent = await diskUsage(path.join(d.worktreesDir, 'acme__widgets'));
    // du also counts the acme__widgets directory itself; the summary counts only the worktrees in it.
    expect(s.bareBytes + worktreesParent).toBe(duTotal);
    expect(s.estimatedFullClonesBytes).toBeGreaterThan(s.bareBytes + s.worktreeBytes);
    expect(s.savedRatio).toBeGreaterThan(0);
    expect(s.savedRatio).toBeLessThan(1);
    expect(s.savedRatio).toBeCloseTo(1 - (s.bareBytes + s.worktreeBytes) / s.estimatedFullClonesBytes, 12);
  });

  it('is empty, with no saving claimed, when nothing was materialized', async () => {
    const s = await diskSummary(dirs());
    expect(s).toMatchObject({ bareBytes: 0, worktreeBytes: 0, worktrees: 0, estimatedFullClonesBytes: 0, savedRatio: 0 });
  });
});

describe('diskUsage', () => {
  it('counts a hard-linked file once and does not follow symlinks', async () => {
    const dir = path.join(root, 'du');
    await fs.mkdir(path.join(dir, 'a'), { recursive: true });
    await fs.writeFile(path.join(dir, 'a', 'big'), Buffer.alloc(256 * 1024, 1));
    const alone = await diskUsage(dir);
    await fs.link(path.join(dir, 'a', 'big'), path.join(dir, 'a', 'big-link'));
    const outside = path.join(root, 'du-outside');
    await fs.mkdir(outside, { recursive: true });
    await fs.writeFile(path.join(outside, 'huge'), Buffer.alloc(1024 * 1024, 1));
    await fs.symlink(outside, path.join(dir, 'to-outside'));
    const withLinks = await diskUsage(dir);
    expect(alone).toBeGreaterThanOrEqual(256 * 1024);
    expect(withLinks - alone).toBeLessThan(64 * 1024);
    // One `seen` set across calls counts what two trees share once.
    const seen = new Set<string>();
    const first = await diskUsage(path.join(dir, 'a'), { seen });
    expect(await diskUsage(path.join(dir, 'a'), { seen })).toBe(0);
    expect(first).toBeGreaterThan(0);
  });
});

describe('pruneWorktrees', () => {
  it('removes unkept, old and half-made worktrees and unregisters them', async () => {
    const d = dirs();
    const commits = widgets.commits.slice(0, 4);
    const rows = await materializeAll(
      commits.map((commit) => ({ repo: 'acme/widgets', commit })),
      { ...d, source },
    );
    const [keptByKey, keptByPath, old, fresh] = rows.map((r) => r.path) as [string, string, string, string];
    const bare = path.join(d.cacheDir, 'acme__widgets.git');
    // Age `old`: its marker was last touched two hours ago.
    const adminOld = (await git(['rev-parse', '--absolute-git-dir'], { cwd: old, timeoutMs: 10_000 })).trim();
    const twoHoursAgo = new Date(Date.now() - 2 * 3600_000);
    await fs.utimes(path.join(adminOld, 'codegrep-worktree.json'), twoHoursAgo, twoHoursAgo);
    // A half-made one: a directory with no registration and no marker.
    const half = path.join(d.worktreesDir, 'acme__widgets', widgets.commits[9]!);
    await fs.mkdir(half, { recursive: true });
    await fs.writeFile(path.join(half, 'partial.py'), 'x');
    await fs.mkdir(path.join(d.cacheDir, '.acme__widgets.git.tmp-1-dead'), { recursive: true });

    const keep = new Set([worktreeKey('acme/widgets', commits[0]!), keptByPath]);
    const first = await pruneWorktrees({ ...d, keep, olderThanMs: 3600_000 });
    expect(first.failed).toEqual([]);
    expect(first.removed.map((r) => r.path).sort()).toEqual([old, half].sort());
    expect(first.removed.find((r) => r.path === half)!.reason).toMatch(/half-made/);
    expect(first.kept).toBe(3);
    await expect(fs.access(old)).rejects.toThrow();
    await expect(fs.access(half)).rejects.toThrow();
    await expect(fs.access(path.join(d.cacheDir, '.acme__widgets.git.tmp-1-dead'))).rejects.toThrow();
    const listed = (await listWorktrees(bare, parseRepoName('acme/widgets'), {})).map((w) => w.path).sort();
    expect(listed).toEqual([keptByKey, keptByPath, fresh].sort());

    const all = await pruneWorktrees({ ...d, keep });
    expect(all.removed.map((r) => r.path)).toEqual([fresh]);
    expect((await listWorktrees(bare, parseRepoName('acme/widgets'), {})).map((w) => w.path).sort()).toEqual(
      [keptByKey, keptByPath].sort(),
    );

    const none = await pruneWorktrees(d);
    expect(none.removed).toHaveLength(2);
    expect(await listWorktrees(bare, parseRepoName('acme/widgets'), {})).toEqual([]);
    await expect(fs.access(path.join(d.worktreesDir, 'acme__widgets'))).rejects.toThrow();
    // The bare clone stays: the next materialization needs no clone.
    const back = await materializeAll([{ repo: 'acme/widgets', commit: commits[0]! }], { ...d, source });
    expect(back[0]!.status).toBe('created');
  });
});
