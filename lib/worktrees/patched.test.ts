import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSweSmithFixture, type SweSmithFixture } from '../../test/fixtures/codescout/swe-smith';
import { sha256Hex } from '../labels/samples';
import { fixPatchOf } from '../patch/sample-ground-truth';
import { WorktreeError } from './errors';
import { git } from './git';
import { materializeAll } from './materialize';
import { buildMirrors } from './mirrors';
import { ensurePatchedCommit, ensurePatchedWorktree, HEAD_REF } from './patched';

// CodeScout's use_patch trees (its clone_instance: clone at head, `git apply` the patch) as worktrees.
let root: string;
let fixture: SweSmithFixture;
const T = { timeoutMs: 30_000 };
const patchOf = (i: number) => ({ sha256: sha256Hex(fixture.rows[i]!.patch), text: fixture.rows[i]!.patch });
const REPO = 'swesmith/acme__widgets.0123abcd';

beforeAll(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), 'codegrep-patched-'));
  fixture = buildSweSmithFixture(root);
});
afterAll(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

const dirs = (name: string) => ({ cacheDir: path.join(root, name, 'repos'), worktreesDir: path.join(root, name, 'worktrees') });

describe('a use_patch worktree: the repository head with the bug patch applied', () => {
  it('is a clean detached worktree at a commit whose parent is the head and whose tree has the patch', async () => {
    const opts = { ...dirs('mirror'), source: { kind: 'mirror-dir' as const, dir: fixture.mirrors } };
    const w = await ensurePatchedWorktree(REPO, patchOf(0), opts);
    expect(w.status).toBe('created');
    expect(w.patchedFrom).toBe(fixture.head);
    expect(w.path).toBe(path.join(opts.worktreesDir, 'swesmith__acme__widgets.0123abcd', w.commit));
    expect((await git(['rev-parse', 'HEAD', 'HEAD~1'], { ...T, cwd: w.path })).trim().split('\n')).toEqual([w.commit, fixture.head]);
    expect(await fs.readFile(path.join(w.path, 'widgets/gears.py'), 'utf8')).toContain('return math.pi * module\n');
    expect((await git(['status', '--porcelain'], { ...T, cwd: w.path })).trim()).toBe('');
    // The fix is the patch reversed.
    const fix = await git(['diff', 'HEAD', 'HEAD~1'], { ...T, cwd: w.path });
    expect(fix).toContain('+        return math.pi * module * self.teeth');

    // Same (repo, head, patch): the same commit and worktree, reused. Another patch: another tree.
    const again = await ensurePatchedWorktree(REPO, patchOf(0), opts);
    expect([again.status, again.commit, again.path]).toEqual(['reused', w.commit, w.path]);
    const other = await ensurePatchedWorktree(REPO, patchOf(1), opts);
    expect(other.commit).not.toBe(w.commit);
    expect(other.patchedFrom).toBe(fixture.head);
    expect(await fs.readFile(path.join(other.path, 'widgets/gears.py'), 'utf8')).not.toContain('def size');
    // The patched commit's id depends on (head, patch) only: a second cache makes the same one.
    const elsewhere = await ensurePatchedWorktree(REPO, patchOf(0), { ...dirs('mirror-2'), source: opts.source });
    expect(elsewhere.commit).toBe(w.commit);
    // Without a checkout: the same commit in the bare repository, and the same fix read from it.
    const bareOnly = await ensurePatchedCommit(REPO, patchOf(0), { ...dirs('bare-only'), source: opts.source });
    expect(bareOnly.commit).toBe(w.commit);
    expect(await fixPatchOf(bareOnly.path, bareOnly.commit)).toBe(await fixPatchOf(w.path));
    await expect(fs.access(path.join(root, 'bare-only', 'worktrees'))).rejects.toThrow();
  });

  it('from a URL, fetches only the head (depth 1) and pins it', async () => {
    const opts = { ...dirs('url'), source: { kind: 'url' as const, template: `file://${fixture.mirrors}/{owner}__{name}.git` } };
    const w = await ensurePatchedWorktree(REPO, patchOf(0), opts);
    expect(w.patchedFrom).toBe(fixture.head);
    const bare = path.join(opts.cacheDir, 'swesmith__acme__widgets.0123abcd.git');
    expect((await git(['rev-parse', HEAD_REF], { ...T, cwd: bare })).trim()).toBe(fixture.head);
    expect(await fs.readFile(path.join(bare, 'shallow'), 'utf8')).toContain(fixture.head);
  });

  it('codegrep mirrors build: a compact mirror of the head (depth 1, as main) serves the use_patch trees offline', async () => {
    const out = path.join(root, 'compact');
    const [built] = await buildMirrors([{ repo: REPO, commit: 'HEAD' }], {
      outDir: out,
      source: { kind: 'mirror-dir', dir: fixture.mirrors },
    });
    expect(built!.commits).toEqual([{ commit: 'HEAD', status: 'fetched', error: null }]);
    const mirror = path.join(out, 'swesmith__acme__widgets.0123abcd.git');
    expect((await git(['rev-parse', 'HEAD'], { ...T, cwd: mirror })).trim()).toBe(fixture.head);
    // Rebuilding keeps the pinned head.
    const [again] = await buildMirrors([{ repo: REPO, commit: 'HEAD' }], {
      outDir: out,
      source: { kind: 'mirror-dir', dir: fixture.mirrors },
    });
    expect(again!.commits[0]!.status).toBe('present');
    const w = await ensurePatchedWorktree(REPO, patchOf(1), { ...dirs('compact'), source: { kind: 'mirror-dir', dir: out } });
    expect(w.patchedFrom).toBe(fixture.head);
  });

  it('a patch that does not apply, and a missing mirror, fail with their named reasons, one request each', async () => {
    const opts = { ...dirs('fail'), source: { kind: 'mirror-dir' as const, dir: fixture.mirrors } };
    const err = await ensurePatchedWorktree(REPO, patchOf(2), opts).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorktreeError);
    expect((err as WorktreeError).code).toBe('patch-failed');
    expect((err as WorktreeError).retryable).toBe(false);
    expect((err as WorktreeError).message).toMatch(/does not apply to swesmith\/acme__widgets\.0123abcd@[0-9a-f]{40}/);

    const results = await materializeAll(
      [
        { repo: REPO, commit: 'HEAD', bugPatch: patchOf(0) },
        { repo: REPO, commit: 'HEAD', bugPatch: patchOf(2) },
        { repo: 'swesmith/acme__absent.deadbeef', commit: 'HEAD', bugPatch: patchOf(3) },
        { repo: REPO, commit: 'HEAD', bugPatch: patchOf(0) },
      ],
      opts,
    );
    expect(results.map((r) => [r.status, r.errorCode, r.bugPatchSha256])).toEqual([
      ['created', null, patchOf(0).sha256],
      ['failed', 'patch-failed', patchOf(2).sha256],
      ['failed', 'mirror-missing', patchOf(3).sha256],
      ['created', null, patchOf(0).sha256],
    ]);
    expect(results[0]!.patchedFrom).toBe(fixture.head);
    expect(results[3]!.path).toBe(results[0]!.path);
    expect(results[2]!.error).toMatch(/no local mirror of swesmith\/acme__absent\.deadbeef/);
  });

  it('without a checkout (a BM25/dense-only run), materializeAll makes the patched commit in the bare clone and no worktree', async () => {
    const opts = { ...dirs('no-checkout'), source: { kind: 'mirror-dir' as const, dir: fixture.mirrors }, checkout: false };
    const results = await materializeAll(
      [
        { repo: REPO, commit: 'HEAD', bugPatch: patchOf(0) },
        { repo: REPO, commit: 'HEAD', bugPatch: patchOf(2) },
      ],
      opts,
    );
    expect(results.map((r) => [r.status, r.errorCode])).toEqual([
      ['reused', null],
      ['failed', 'patch-failed'],
    ]);
    const made = results[0]!;
    expect(made.patchedFrom).toBe(fixture.head);
    expect(made.bugPatchSha256).toBe(patchOf(0).sha256);
    // The path is the bare clone, which holds the patched commit: the fix is read from it at that commit.
    expect((await git(['rev-parse', '--is-bare-repository'], { ...T, cwd: made.path })).trim()).toBe('true');
    expect(await fixPatchOf(made.path, made.commit)).toContain('+        return math.pi * module * self.teeth');
    await expect(fs.access(path.join(root, 'no-checkout', 'worktrees'))).rejects.toThrow();
  });
});
