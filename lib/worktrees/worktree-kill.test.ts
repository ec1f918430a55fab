import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RepoSource } from '../../schemas/worktrees';
import { ensureBareClone } from './bare-clone';
import { isWorktreeError } from './errors';
import { git, runGit } from './git';
import { bareRepoPath } from './layout';
import { parseRepoName } from './repo-name';
import { createBranch, createSyntheticRepo, type SyntheticRepo } from './synthetic-repo';
import { ensureWorktree, listWorktrees, removeInterruptedAdds, type EnsuredWorktree } from './worktree';

/**
 * Kill-at-any-moment tests of the worktree layer (BENCHMARKS.md "Chaos"): `git clone --bare`, `git fetch` and
 * `git worktree add` are SIGKILLed (with their whole process group, through ensureWorktree's abort signal,
 * the way a killed worker's git dies) at 50 random moments each. After every kill, ensureWorktree ends with a
 * verified worktree, and the other worktrees of the repository are still reused as they were.
 */
const REPO = 'acme/killme';
const TRIALS = 50;
let root: string;
let src: SyntheticRepo;
let source: RepoSource;

beforeAll(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), 'codegrep-wt-kill-'));
  // Big enough that each git command takes some milliseconds to kill into, small enough for 150 trials.
  src = await createSyntheticRepo(path.join(root, 'sources', 'acme', 'killme'), { files: 300, commits: 6 });
  source = { kind: 'url', template: `${root}/sources/{repo}` };
}, 120_000);
afterAll(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

let caseNo = 0;
function dirs() {
  const base = path.join(root, `case-${++caseNo}`);
  return { cacheDir: path.join(base, 'cache'), worktreesDir: path.join(base, 'worktrees') };
}

/** Deterministic pseudo-random delays (a run can be reproduced from the seed in the failure). */
function lcg(seed: number): () => number {
  let x = seed >>> 0;
  return () => (x = (Math.imul(x, 1664525) + 1013904223) >>> 0) / 2 ** 32;
}

async function expectVerified(w: EnsuredWorktree, commit: string): Promise<void> {
  expect(w.commit).toBe(commit);
  expect((await git(['rev-parse', 'HEAD'], { cwd: w.path, timeoutMs: 20_000 })).trim()).toBe(commit);
  expect(await git(['status', '--porcelain', '--ignored'], { cwd: w.path, timeoutMs: 20_000 })).toBe('');
  const files = (await git(['ls-files'], { cwd: w.path, timeoutMs: 20_000 })).trim().split('\n');
  expect(files.length).toBeGreaterThan(300);
}

/** Runs ensureWorktree with an abort (SIGKILL of git's process group) after `delayMs`; true when it was cut. */
async function killedAfter(delayMs: number, commit: string, opts: Parameters<typeof ensureWorktree>[2]): Promise<boolean> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), delayMs);
  try {
    await ensureWorktree(REPO, commit, { ...opts, signal: controller.signal });
    return false;
  } catch (error) {
    if (isWorktreeError(error) && error.code === 'aborted') return true;
    if (controller.signal.aborted && (error as Error).name === 'AbortError') return true;
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/** Milliseconds of one uninterrupted run of `work`, so kills land inside it. */
async function timed(work: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await work();
  return Math.max(5, performance.now() - t0);
}

describe('worktree repair after a kill at any moment', () => {
  it('reproduces the poisoned bare clone: an empty commondir left by a killed add breaks `git worktree list`; ensureWorktree repairs it', async () => {
    const d = dirs();
    const other = await ensureWorktree(REPO, src.commits[0]!, { ...d, source });
    const bare = bareRepoPath(d.cacheDir, parseRepoName(REPO));
    // The state `git worktree add` leaves when killed right after creating commondir, before writing it.
    const entry = path.join(bare, 'worktrees', 'half');
    const checkout = path.join(d.worktreesDir, 'acme__killme', src.commits[1]!);
    await fs.mkdir(entry, { recursive: true });
    await fs.mkdir(checkout, { recursive: true });
    await fs.writeFile(path.join(entry, 'locked'), 'initializing\n');
    await fs.writeFile(path.join(entry, 'gitdir'), `${checkout}/.git\n`);
    await fs.writeFile(path.join(checkout, '.git'), `gitdir: ${entry}\n`);
    await fs.writeFile(path.join(entry, 'commondir'), '');
    const listed = await runGit(['worktree', 'list', '--porcelain'], { cwd: bare, timeoutMs: 20_000 });
    expect(listed.code).toBe(128);
    expect(listed.stderr).toContain('failed to read worktrees/half/commondir');
    // git's own cleanup does not cope with it.
    await runGit(['worktree', 'prune'], { cwd: bare, timeoutMs: 20_000 });
    expect((await runGit(['worktree', 'list'], { cwd: bare, timeoutMs: 20_000 })).code).toBe(128);

    const w = await ensureWorktree(REPO, src.commits[1]!, { ...d, source });
    await expectVerified(w, src.commits[1]!);
    expect((await ensureWorktree(REPO, src.commits[0]!, { ...d, source })).status).toBe('reused');
    expect((await listWorktrees(bare, parseRepoName(REPO), {})).map((l) => l.path).sort()).toEqual([other.path, w.path].sort());
  });

  it('repairs the shallow.lock a killed `git fetch --depth=1` leaves, which blocks every later fetch', async () => {
    const d = dirs();
    await ensureWorktree(REPO, src.commits[0]!, { ...d, source });
    const bare = bareRepoPath(d.cacheDir, parseRepoName(REPO));
    const [late] = await createBranch(src.dir, 'late-for-lock', [{ 'LOCKED.txt': 'late\n' }]);
    await fs.writeFile(path.join(bare, 'shallow.lock'), '');
    const blocked = await runGit(['fetch', '--depth=1', 'origin', late!], { cwd: bare, timeoutMs: 20_000 });
    expect(blocked.code).not.toBe(0);
    expect(blocked.stderr).toContain('shallow.lock');
    const w = await ensureWorktree(REPO, late!, { ...d, source });
    expect(await fs.readFile(path.join(w.path, 'LOCKED.txt'), 'utf8')).toBe('late\n');
  });

  it('removes only the half-made entry and its own checkout, never a complete worktree or a foreign directory', async () => {
    const d = dirs();
    const kept = await ensureWorktree(REPO, src.commits[2]!, { ...d, source });
    const bare = bareRepoPath(d.cacheDir, parseRepoName(REPO));
    const foreign = path.join(root, 'not-ours');
    await fs.mkdir(foreign, { recursive: true });
    await fs.writeFile(path.join(foreign, 'keep.txt'), 'mine\n');
    const entry = path.join(bare, 'worktrees', 'stray');
    await fs.mkdir(entry, { recursive: true });
    await fs.writeFile(path.join(entry, 'gitdir'), `${foreign}/.git\n`);
    expect(await removeInterruptedAdds(bare, d.worktreesDir)).toEqual(['stray']);
    expect(await fs.readFile(path.join(foreign, 'keep.txt'), 'utf8')).toBe('mine\n');
    expect((await ensureWorktree(REPO, src.commits[2]!, { ...d, source })).status).toBe('reused');
    await expectVerified(kept, src.commits[2]!);
  });

  it(`git worktree add killed at ${TRIALS} random moments: each time a verified worktree, the others unharmed`, async () => {
    const d = dirs();
    const others = [
      await ensureWorktree(REPO, src.commits[0]!, { ...d, source }),
      await ensureWorktree(REPO, src.commits[1]!, { ...d, source }),
    ];
    const bare = bareRepoPath(d.cacheDir, parseRepoName(REPO));
    const targets = src.commits.slice(2);
    const removeTarget = async (commit: string) => {
      const wt = path.join(d.worktreesDir, 'acme__killme', commit);
      await runGit(['worktree', 'remove', '--force', '--force', wt], { cwd: bare, timeoutMs: 20_000 });
      await fs.rm(wt, { recursive: true, force: true });
    };
    const span = await timed(async () => {
      await ensureWorktree(REPO, targets[0]!, { ...d, source });
      await removeTarget(targets[0]!);
    });
    const random = lcg(12);
    let cut = 0;
    for (let trial = 0; trial < TRIALS; trial++) {
      const commit = targets[trial % targets.length]!;
      const delay = random() * span;
      if (await killedAfter(delay, commit, { ...d, source })) cut += 1;
      const w = await ensureWorktree(REPO, commit, { ...d, source });
      await expectVerified(w, commit);
      for (const other of others)
        expect((await ensureWorktree(REPO, other.commit, { ...d, source })).status, `trial ${trial}, delay ${delay} ms`).toBe('reused');
      await removeTarget(commit);
    }
    console.log(`worktree add: ${cut} of ${TRIALS} runs cut by the kill (span ${span.toFixed(0)} ms)`);
    expect(cut).toBeGreaterThanOrEqual(TRIALS / 4);
  }, 300_000);

  it(`git clone --bare killed at ${TRIALS} random moments: each time a verified worktree`, async () => {
    const probe = dirs();
    const span = await timed(() => ensureBareClone(REPO, source, probe.cacheDir));
    const random = lcg(34);
    let cut = 0;
    for (let trial = 0; trial < TRIALS; trial++) {
      const d = dirs();
      if (await killedAfter(random() * span, src.commits[3]!, { ...d, source })) cut += 1;
      const w = await ensureWorktree(REPO, src.commits[3]!, { ...d, source });
      await expectVerified(w, src.commits[3]!);
      // Nothing of the killed clone is left beside the bare clone.
      expect((await fs.readdir(d.cacheDir)).filter((n) => n !== 'locks').sort()).toEqual(['acme__killme.git']);
    }
    console.log(`clone: ${cut} of ${TRIALS} runs cut by the kill (span ${span.toFixed(0)} ms)`);
    expect(cut).toBeGreaterThanOrEqual(TRIALS / 4);
  }, 300_000);

  it(`git fetch killed at ${TRIALS} random moments: each time a verified worktree, the others unharmed`, async () => {
    // A bare clone made before the source gained a branch: each trial's worktree needs a fetch.
    const template = dirs();
    const old = await ensureWorktree(REPO, src.commits[4]!, { ...template, source });
    const templateBare = bareRepoPath(template.cacheDir, parseRepoName(REPO));
    const newFiles = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`late/file_${i}.txt`, `late ${i}\n`.repeat(50)]));
    const [late] = await createBranch(src.dir, 'late-for-kill', [newFiles]);
    // Each trial: a copy of that bare clone with a worktree of its own, then the fetch that gets killed.
    const fresh = async () => {
      const d = dirs();
      await fs.cp(template.cacheDir, d.cacheDir, { recursive: true });
      await fs.rm(path.join(bareRepoPath(d.cacheDir, parseRepoName(REPO)), 'worktrees'), { recursive: true, force: true });
      expect((await ensureWorktree(REPO, old.commit, { ...d, source })).commitSource).toBe('present');
      return d;
    };
    const probe = await fresh();
    const span = await timed(() => ensureWorktree(REPO, late!, { ...probe, source }));
    const random = lcg(56);
    let cut = 0;
    for (let trial = 0; trial < TRIALS; trial++) {
      const d = await fresh();
      if (await killedAfter(random() * span, late!, { ...d, source })) cut += 1;
      const w = await ensureWorktree(REPO, late!, { ...d, source });
      await expectVerified(w, late!);
      expect((await ensureWorktree(REPO, old.commit, { ...d, source })).status, `trial ${trial}`).toBe('reused');
    }
    expect(templateBare).not.toBe(bareRepoPath(probe.cacheDir, parseRepoName(REPO)));
    console.log(`fetch: ${cut} of ${TRIALS} runs cut by the kill (span ${span.toFixed(0)} ms)`);
    expect(cut).toBeGreaterThanOrEqual(TRIALS / 4);
  }, 300_000);
});
