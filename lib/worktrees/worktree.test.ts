import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RepoSource } from '../../schemas/worktrees';
import { ensureBareClone } from './bare-clone';
import { WorktreeError } from './errors';
import { git } from './git';
import { parseRepoName } from './repo-name';
import { bareMirror, createBranch, createSyntheticRepo, type SyntheticRepo } from './synthetic-repo';
import { ensureWorktree, listWorktrees } from './worktree';

const REPO = 'acme/widgets';
let root: string;
let src: SyntheticRepo;
let urlSource: RepoSource;
let mirrorSource: RepoSource;
let caseNo = 0;

beforeAll(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), 'codegrep-wt-'));
  src = await createSyntheticRepo(path.join(root, 'sources', 'acme', 'widgets'), { files: 30, commits: 12 });
  urlSource = { kind: 'url', template: `${root}/sources/{repo}` };
  await bareMirror(src.dir, path.join(root, 'mirrors', 'acme__widgets.git'));
  mirrorSource = { kind: 'mirror-dir', dir: path.join(root, 'mirrors') };
});
afterAll(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

/** A fresh cache and worktrees dir per test, sharing the source repository. */
function dirs() {
  const base = path.join(root, `case-${++caseNo}`);
  return { cacheDir: path.join(base, 'cache'), worktreesDir: path.join(base, 'worktrees') };
}

async function readVersion(wt: string): Promise<string> {
  return (await fs.readFile(path.join(wt, 'VERSION'), 'utf8')).trim();
}

async function expectCleanCheckout(wt: string, commit: string): Promise<void> {
  expect((await git(['rev-parse', 'HEAD'], { cwd: wt, timeoutMs: 10_000 })).trim()).toBe(commit);
  expect(await git(['status', '--porcelain', '--ignored'], { cwd: wt, timeoutMs: 10_000 })).toBe('');
  const tracked = (await git(['ls-tree', '-r', '--name-only', commit], { cwd: wt, timeoutMs: 10_000 })).trim().split('\n');
  for (const f of tracked.slice(0, 5)) await fs.access(path.join(wt, f));
}

describe.concurrent('ensureWorktree', () => {
  it('creates a detached worktree per commit under <worktreesDir>/<owner>__<name>/<commit>, then reuses it', async () => {
    const d = dirs();
    const first = await ensureWorktree(REPO, src.commits[3]!, { ...d, source: mirrorSource });
    expect(first.status).toBe('created');
    expect(first.path).toBe(path.join(d.worktreesDir, 'acme__widgets', src.commits[3]!));
    expect(await readVersion(first.path)).toBe('3');
    expect(first.bytes).toBeGreaterThan(30 * 512);
    await expectCleanCheckout(first.path, src.commits[3]!);
    // The bare clone is where the layout says, and knows the worktree.
    const bare = path.join(d.cacheDir, 'acme__widgets.git');
    expect((await git(['rev-parse', '--is-bare-repository'], { cwd: bare, timeoutMs: 10_000 })).trim()).toBe('true');
    const listed = await listWorktrees(bare, parseRepoName(REPO), {});
    expect(listed.map((w) => w.path)).toEqual([first.path]);

    const again = await ensureWorktree(REPO, src.commits[3]!, { ...d, source: mirrorSource });
    expect(again.status).toBe('reused');
    expect(again.path).toBe(first.path);
    expect(again.bytes).toBe(first.bytes);
  });

  it('also finds mirrors laid out as <dir>/<owner>/<name>.git', async () => {
    await bareMirror(src.dir, path.join(root, 'nested-mirrors', 'acme', 'widgets.git'));
    const w = await ensureWorktree(REPO, src.commits[1]!, {
      ...dirs(),
      source: { kind: 'mirror-dir', dir: path.join(root, 'nested-mirrors') },
    });
    expect(w.status).toBe('created');
    expect(await readVersion(w.path)).toBe('1');
  });

  it('fails with a clear, non-retryable error naming repo and commit when the commit exists nowhere', async () => {
    const missing = 'deadbeef'.repeat(5);
    const err = await ensureWorktree(REPO, missing, { ...dirs(), source: urlSource }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorktreeError);
    const e = err as WorktreeError;
    expect(e.code).toBe('commit-missing');
    expect(e.retryable).toBe(false);
    expect(e.message).toContain(REPO);
    expect(e.message).toContain(missing);
  });

  it('fails fast, naming the repo and the config key, when a mirror dir lacks the repo', async () => {
    const t0 = performance.now();
    const err = await ensureWorktree('acme/nothere', src.commits[0]!, { ...dirs(), source: mirrorSource }).catch((e: unknown) => e);
    expect(performance.now() - t0).toBeLessThan(2_000);
    const e = err as WorktreeError;
    expect(e).toBeInstanceOf(WorktreeError);
    expect(e.code).toBe('repo-unreachable');
    expect(e.retryable).toBe(false);
    expect(e.message).toContain('acme/nothere');
    expect(e.message).toContain('acme__nothere.git');
    expect(e.message).toContain('environment.repoSource');
  });

  it('fails fast, naming the repo and the config key, when the URL leads nowhere', async () => {
    const t0 = performance.now();
    const d = dirs();
    const err = await ensureWorktree('acme/typo', src.commits[0]!, {
      ...d,
      source: { kind: 'url', template: 'file:///nonexistent/{repo}.git' },
    }).catch((e: unknown) => e);
    expect(performance.now() - t0).toBeLessThan(5_000);
    const e = err as WorktreeError;
    expect(e).toBeInstanceOf(WorktreeError);
    expect(e.code).toBe('repo-unreachable');
    expect(e.retryable).toBe(false);
    expect(e.message).toContain('acme/typo');
    expect(e.message).toContain('file:///nonexistent/acme/typo.git');
    expect(e.message).toContain('environment.repoSource');
    // Nothing was fetched: at most the empty repository that fetches base commits, and no temp dir.
    const left = (await fs.readdir(d.cacheDir)).filter((n) => n !== 'locks');
    expect(left.filter((n) => n !== 'acme__typo.git')).toEqual([]);
    if (left.length > 0) {
      const refs = await git(['for-each-ref'], { cwd: path.join(d.cacheDir, 'acme__typo.git'), timeoutMs: 10_000 });
      expect(refs.trim()).toBe('');
    }
  });

  it('makes a commit once when two requests race; the other reuses it', async () => {
    const d = dirs();
    const [a, b] = await Promise.all([
      ensureWorktree(REPO, src.commits[5]!, { ...d, source: mirrorSource }),
      ensureWorktree(REPO, src.commits[5]!, { ...d, source: mirrorSource }),
    ]);
    expect([a.status, b.status].sort()).toEqual(['created', 'reused']);
    expect(a.path).toBe(b.path);
    const listed = await listWorktrees(path.join(d.cacheDir, 'acme__widgets.git'), parseRepoName(REPO), {});
    expect(listed).toHaveLength(1);
  });

  it('repairs a worktree whose `git worktree add` was killed mid-way', async () => {
    const d = dirs();
    const big = await createSyntheticRepo(path.join(root, 'sources', 'acme', 'big'), { files: 400, commits: 2 });
    const source: RepoSource = { kind: 'url', template: `${root}/sources/{repo}` };
    const { path: bare } = await ensureBareClone('acme/big', source, d.cacheDir);
    await git(['fetch', '--quiet', '--depth=1', 'origin', big.commits[1]!], { cwd: bare, timeoutMs: 60_000 });
    const wt = path.join(d.worktreesDir, 'acme__big', big.commits[1]!);
    await fs.mkdir(path.dirname(wt), { recursive: true });
    const child = spawn('git', ['worktree', 'add', '--detach', wt, big.commits[1]!], { cwd: bare, stdio: 'ignore' });
    // Listened for from the start: on a loaded machine git may finish before the kill, and a 'close' already
    // emitted is never emitted again.
    const closed = new Promise((r) => child.once('close', r));
    // Kill once the worktree is registered (admin dir written), i.e. while it checks out files.
    const admin = path.join(bare, 'worktrees');
    for (let i = 0; i < 400; i++) {
      if ((await fs.readdir(admin).catch(() => [])).length > 0) break;
      await new Promise((r) => setTimeout(r, 2));
    }
    child.kill('SIGKILL');
    await closed;

    const w = await ensureWorktree('acme/big', big.commits[1]!, { ...d, source });
    // Whatever the kill left, it was not trusted: our marker is written only after a finished add.
    expect(['created', 'repaired']).toContain(w.status);
    await expectCleanCheckout(w.path, big.commits[1]!);
    const files = (await git(['ls-files'], { cwd: w.path, timeoutMs: 10_000 })).trim().split('\n');
    expect(files).toHaveLength(401);
    expect(await listWorktrees(bare, parseRepoName('acme/big'), {})).toHaveLength(1);
  });

  it('repairs a registered worktree that has no completion marker', async () => {
    const d = dirs();
    const w = await ensureWorktree(REPO, src.commits[2]!, { ...d, source: mirrorSource });
    const adminDir = (await git(['rev-parse', '--absolute-git-dir'], { cwd: w.path, timeoutMs: 10_000 })).trim();
    await fs.rm(path.join(adminDir, 'codegrep-worktree.json'));
    const again = await ensureWorktree(REPO, src.commits[2]!, { ...d, source: mirrorSource });
    expect(again.status).toBe('repaired');
    expect(again.repairReason).toMatch(/completion marker/);
    await expectCleanCheckout(again.path, src.commits[2]!);
  });

  it('repairs a directory that git does not know and a registration whose directory is gone', async () => {
    const d = dirs();
    const stray = path.join(d.worktreesDir, 'acme__widgets', src.commits[4]!);
    await fs.mkdir(stray, { recursive: true });
    await fs.writeFile(path.join(stray, 'leftover.py'), 'x = 1\n');
    const w = await ensureWorktree(REPO, src.commits[4]!, { ...d, source: mirrorSource });
    expect(w.status).toBe('repaired');
    expect(w.repairReason).toMatch(/does not list it/);
    await expect(fs.access(path.join(w.path, 'leftover.py'))).rejects.toThrow();
    await expectCleanCheckout(w.path, src.commits[4]!);

    await fs.rm(w.path, { recursive: true, force: true });
    const back = await ensureWorktree(REPO, src.commits[4]!, { ...d, source: mirrorSource });
    expect(back.status).toBe('repaired');
    expect(back.repairReason).toMatch(/directory is gone/);
    await expectCleanCheckout(back.path, src.commits[4]!);
  });

  it('repairs a locked "initializing" registration left by a killed add', async () => {
    const d = dirs();
    const w = await ensureWorktree(REPO, src.commits[6]!, { ...d, source: mirrorSource });
    const adminDir = (await git(['rev-parse', '--absolute-git-dir'], { cwd: w.path, timeoutMs: 10_000 })).trim();
    await fs.writeFile(path.join(adminDir, 'locked'), 'initializing');
    await fs.rm(path.join(adminDir, 'codegrep-worktree.json'));
    await fs.rm(w.path, { recursive: true, force: true });
    const again = await ensureWorktree(REPO, src.commits[6]!, { ...d, source: mirrorSource });
    expect(again.status).toBe('repaired');
    await expectCleanCheckout(again.path, src.commits[6]!);
  });

  it.each([
    ['a deleted file', async (wt: string) => fs.rm(path.join(wt, 'VERSION')), /not clean/],
    ['a modified file', async (wt: string) => fs.writeFile(path.join(wt, 'VERSION'), 'tampered\n'), /not clean/],
    ['an added file', async (wt: string) => fs.writeFile(path.join(wt, 'extra.py'), 'x\n'), /not clean/],
    [
      'an ignored file',
      async (wt: string) => {
        // The bare repository's info/exclude applies to its worktrees: *.pyc is ignored, yet still not ours.
        const common = (await git(['rev-parse', '--git-common-dir'], { cwd: wt, timeoutMs: 10_000 })).trim();
        await fs.mkdir(path.join(common, 'info'), { recursive: true });
        await fs.writeFile(path.join(common, 'info', 'exclude'), '*.pyc\n');
        expect(await git(['status', '--porcelain'], { cwd: wt, timeoutMs: 10_000 })).toBe('');
        await fs.writeFile(path.join(wt, 'cache.pyc'), 'x');
        expect(await git(['status', '--porcelain'], { cwd: wt, timeoutMs: 10_000 })).toBe('');
      },
      /not clean: !! cache.pyc/,
    ],
    [
      'a moved HEAD',
      async (wt: string) => {
        await git(['checkout', '--quiet', '--detach', src.commits[0]!], { cwd: wt, timeoutMs: 10_000 });
      },
      /HEAD is/,
    ],
  ])('rebuilds a worktree corrupted by %s', async (_what, corrupt, reason) => {
    const d = dirs();
    const w = await ensureWorktree(REPO, src.commits[7]!, { ...d, source: mirrorSource });
    await corrupt(w.path);
    const again = await ensureWorktree(REPO, src.commits[7]!, { ...d, source: mirrorSource });
    expect(again.status).toBe('repaired');
    expect(again.repairReason).toMatch(reason);
    expect(await readVersion(again.path)).toBe('7');
    await expectCleanCheckout(again.path, src.commits[7]!);
  });

  it('re-clones a bare repository that was left half-made, and clears temp clones', async () => {
    const d = dirs();
    const bare = path.join(d.cacheDir, 'acme__widgets.git');
    await fs.mkdir(path.join(bare, 'objects'), { recursive: true });
    await fs.writeFile(path.join(bare, 'HEAD'), 'ref: refs/heads/main\n');
    const temp = path.join(d.cacheDir, '.acme__widgets.git.tmp-999-abcd');
    await fs.mkdir(temp, { recursive: true });
    const r = await ensureBareClone(REPO, mirrorSource, d.cacheDir);
    expect(r.status).toBe('recloned');
    await expect(fs.access(temp)).rejects.toThrow();
    expect((await ensureBareClone(REPO, mirrorSource, d.cacheDir)).status).toBe('existing');
    const w = await ensureWorktree(REPO, src.commits[8]!, { ...d, source: mirrorSource });
    expect(await readVersion(w.path)).toBe('8');
  });

  it('keeps a fetched commit available without network after the source disappears', async () => {
    const d = dirs();
    const gone = await createSyntheticRepo(path.join(root, 'sources', 'acme', 'gone'), { files: 5, commits: 3 });
    await ensureWorktree('acme/gone', gone.commits[0]!, { ...d, source: urlSource });
    const before = await ensureWorktree('acme/gone', gone.commits[2]!, { ...d, source: urlSource });
    await fs.rm(gone.dir, { recursive: true, force: true });
    const bare = path.join(d.cacheDir, 'acme__gone.git');
    await git(['worktree', 'remove', '--force', before.path], { cwd: bare, timeoutMs: 10_000 });
    const w = await ensureWorktree('acme/gone', gone.commits[2]!, { ...d, source: urlSource });
    expect(w.commitSource).toBe('present');
    expect(await readVersion(w.path)).toBe('2');
    // Only the base commits were fetched: commit 1, between them, is not in the repository.
    const between = await git(['cat-file', '-t', gone.commits[1]!], { cwd: bare, timeoutMs: 10_000 }).catch((e: unknown) => e);
    expect(between).toBeInstanceOf(WorktreeError);
    const extra = 'feedface'.repeat(5);
    const err = await ensureWorktree('acme/gone', extra, { ...d, source: urlSource }).catch((e: unknown) => e);
    expect((err as WorktreeError).code).toBe('repo-unreachable');
    expect((err as WorktreeError).message).toContain(extra);
  });
});

describe('fetching only the base commits from a URL', () => {
  it('starts from an empty bare repository and fetches each base commit with depth 1', async () => {
    const d = dirs();
    const fileUrl: RepoSource = { kind: 'url', template: `file://${root}/sources/{repo}` };
    const clone = await ensureBareClone(REPO, fileUrl, d.cacheDir);
    expect(clone.status).toBe('cloned');
    const count = async () => Number((await git(['rev-list', '--all', '--count'], { cwd: clone.path, timeoutMs: 10_000 })).trim() || '0');
    expect(await count()).toBe(0);
    const a = await ensureWorktree(REPO, src.commits[2]!, { ...d, source: fileUrl });
    const b = await ensureWorktree(REPO, src.commits[9]!, { ...d, source: fileUrl });
    expect([a.commitSource, b.commitSource]).toEqual(['fetched-commit', 'fetched-commit']);
    expect(await readVersion(b.path)).toBe('9');
    await expectCleanCheckout(a.path, src.commits[2]!);
    // Two commits of twelve, each a shallow boundary: no history came with them.
    const shallow = (await fs.readFile(path.join(clone.path, 'shallow'), 'utf8')).trim().split('\n').sort();
    expect(shallow).toEqual([src.commits[2]!, src.commits[9]!].sort());
    expect((await git(['rev-list', '--count', src.commits[9]!], { cwd: clone.path, timeoutMs: 10_000 })).trim()).toBe('1');
    // Each fetch arrived as a pack, not as loose objects written one by one (a fetch killed midway would leave the
    // commit without its tree, and every later `worktree add` of it failing with "unable to read tree").
    const objects = await git(['count-objects', '-v'], { cwd: clone.path, timeoutMs: 10_000 });
    expect(objects).toMatch(/^count: 0$/m);
    expect(objects).toMatch(/^packs: 2$/m);
  });
});

// These add branches to the shared source repository, so they run one after the other.
describe('ensureWorktree fetching from a changing source', () => {
  it('fetches a commit made after the bare clone (a new branch in the source)', async () => {
    const d = dirs();
    await ensureBareClone(REPO, urlSource, d.cacheDir);
    const [late] = await createBranch(src.dir, 'late-branch', [{ 'LATE.txt': 'late\n' }]);
    const w = await ensureWorktree(REPO, late!, { ...d, source: urlSource });
    expect(w.status).toBe('created');
    expect(['fetched-commit', 'fetched-all']).toContain(w.commitSource);
    expect(await fs.readFile(path.join(w.path, 'LATE.txt'), 'utf8')).toBe('late\n');
  });

  it('falls back to every branch with full history (unshallowing) when the server refuses an unadvertised commit', async () => {
    const d = dirs();
    const { path: bare } = await ensureBareClone(REPO, urlSource, d.cacheDir);
    // A first base commit fetched with depth 1 leaves a shallow boundary that the fallback must lift.
    await ensureWorktree(REPO, src.commits[1]!, { ...d, source: urlSource });
    await fs.access(path.join(bare, 'shallow'));
    // Not a branch tip: protocol v0 servers refuse `fetch <sha>` for it; only fetching the branch brings it.
    const [inner] = await createBranch(src.dir, 'hidden-branch', [{ 'HIDDEN.txt': 'inner\n' }, { 'HIDDEN.txt': 'tip\n' }]);
    const saved = { ...process.env };
    Object.assign(process.env, { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'protocol.version', GIT_CONFIG_VALUE_0: '0' });
    try {
      const w = await ensureWorktree(REPO, inner!, { ...d, source: urlSource });
      expect(w.commitSource).toBe('fetched-all');
      expect(await fs.readFile(path.join(w.path, 'HIDDEN.txt'), 'utf8')).toBe('inner\n');
      await expect(fs.access(path.join(bare, 'shallow'))).rejects.toThrow();
      expect(Number((await git(['rev-list', '--count', src.commits[11]!], { cwd: bare, timeoutMs: 10_000 })).trim())).toBe(12);
    } finally {
      for (const k of ['GIT_CONFIG_COUNT', 'GIT_CONFIG_KEY_0', 'GIT_CONFIG_VALUE_0']) delete process.env[k];
      Object.assign(process.env, saved);
    }
  });
});
