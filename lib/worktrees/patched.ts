import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DEFAULT_REPO_SOURCE, type RepoSource } from '../../schemas/worktrees';
import { ATOMIC_FETCH, ensureBareCloneLocked, localOpts, CLONE_TIMEOUT_MS, type GitTimeouts } from './bare-clone';
import { WorktreeError } from './errors';
import { git, lastLines, runGit } from './git';
import { repoLockPath } from './layout';
import { withRepoLock } from './repo-lock';
import { parseRepoName, type RepoName } from './repo-name';
import { looksUnreachable, parseRepoSource, resolveRemote, unreachableHint } from './repo-source';
import { ensureWorktreeLocked, type EnsuredWorktree, type WorktreeOptions } from './worktree';

/**
 * CodeScout's SWE-Smith instances (`use_patch: true`, its src/utils/instance.py `clone_instance`): the
 * repository `swesmith/<owner>__<repo>.<commit8>` is cloned at its head and the instance's `patch` is applied
 * with `git apply`, which introduces the bug the agent has to localize.
 *
 * Here the patched tree becomes a real commit in the bare repository, made without a checkout: the head's tree
 * read into a private index, `git apply --cached` of the patch, `write-tree`, `commit-tree` with a fixed
 * author, date and a message naming the patch's sha256. Its id is therefore a function of (head, patch): two
 * instances with the same patch share one tree, two different patches never do. The worktree is then an
 * ordinary detached worktree at that commit (`<worktreesDir>/<owner>__<name>/<commit>`), verified and reused
 * like any other, and `git diff HEAD HEAD~1` in it is the fix.
 *
 * The head is resolved once per repository and pinned under HEAD_REF, so every instance of a repository (and
 * every later run on the same cache) patches the same commit even if the remote moves.
 */
export const HEAD_REF = 'refs/codegrep/head';
export const PATCHED_REF_PREFIX = 'refs/codegrep/patched';

export interface BugPatch {
  /** sha256 (hex) of `text`. */
  sha256: string;
  text: string;
}

export interface EnsuredPatchedWorktree extends EnsuredWorktree {
  /** The head the patch was applied to; `commit` is the patched commit. */
  patchedFrom: string;
  bugPatchSha256: string;
}

/** A fixed identity and date, so the patched commit's id depends on (head, patch) only. */
const PATCH_COMMIT_ENV = {
  GIT_AUTHOR_NAME: 'codegrep',
  GIT_AUTHOR_EMAIL: 'codegrep@localhost',
  GIT_AUTHOR_DATE: '1970-01-01T00:00:00Z',
  GIT_COMMITTER_NAME: 'codegrep',
  GIT_COMMITTER_EMAIL: 'codegrep@localhost',
  GIT_COMMITTER_DATE: '1970-01-01T00:00:00Z',
};

/** The worktree of `repo`'s head with `patch` applied, made or reused under the repository's lock. */
export async function ensurePatchedWorktree(repo: string, patch: BugPatch, opts: WorktreeOptions): Promise<EnsuredPatchedWorktree> {
  return withPatchedCommit(repo, patch, opts, async ({ name, source, head, commit }) => {
    const w = await ensureWorktreeLocked(name, commit, source, opts);
    return { ...w, patchedFrom: head, bugPatchSha256: patch.sha256 };
  });
}

/**
 * The patched commit alone, in the bare repository, with no checkout (for readers of the object database, such
 * as BM25 and dense from blobs): `path` is the bare repository, `commit` the patched commit.
 */
export async function ensurePatchedCommit(
  repo: string,
  patch: BugPatch,
  opts: WorktreeOptions,
): Promise<{ path: string; commit: string; patchedFrom: string; bugPatchSha256: string }> {
  return withPatchedCommit(repo, patch, opts, async ({ bare, head, commit }) => ({
    path: bare,
    commit,
    patchedFrom: head,
    bugPatchSha256: patch.sha256,
  }));
}

interface PatchedCommitLocked {
  name: RepoName;
  source: RepoSource;
  /** The bare repository, its pinned head, and the patched commit made from it. */
  bare: string;
  head: string;
  commit: string;
}

/** Makes or reuses the patched commit under the repository's lock, then runs `use` still holding the lock. */
async function withPatchedCommit<T>(
  repo: string,
  patch: BugPatch,
  opts: WorktreeOptions,
  use: (locked: PatchedCommitLocked) => Promise<T>,
): Promise<T> {
  const name = parseRepoName(repo);
  const source = parseRepoSource(opts.source ?? DEFAULT_REPO_SOURCE);
  return withRepoLock(
    repoLockPath(opts.cacheDir, name),
    async () => {
      const { path: bare } = await ensureBareCloneLocked(name, source, opts.cacheDir, opts);
      const head = await resolveHeadLocked(name, bare, source, opts);
      const commit = await ensurePatchedCommitLocked(name, bare, head, patch, opts);
      return use({ name, source, bare, head, commit });
    },
    { ...opts.lock, signal: opts.signal },
  );
}

/**
 * The repository's head commit, pinned under HEAD_REF the first time: from a mirror clone its HEAD, from a URL
 * `git fetch --depth=1 origin HEAD` (the remote's default branch, as `git clone` takes it). Caller holds the lock.
 */
export async function resolveHeadLocked(repo: RepoName, bare: string, source: RepoSource, opts: GitTimeouts): Promise<string> {
  const local = localOpts(bare, opts, repo);
  const pinned = await runGit(['rev-parse', '--verify', '--quiet', `${HEAD_REF}^{commit}`], local);
  if (pinned.code === 0) return pinned.stdout.trim();

  const remote = await resolveRemote(repo, source);
  let head: string;
  if (remote.kind === 'url') {
    const fetched = await runGit([...ATOMIC_FETCH, 'fetch', '--quiet', '--depth=1', 'origin', `+HEAD:${HEAD_REF}`], {
      cwd: bare,
      timeoutMs: opts.cloneTimeoutMs ?? CLONE_TIMEOUT_MS,
      signal: opts.signal,
    });
    if (fetched.code !== 0) {
      const unreachable = looksUnreachable(fetched.stderr);
      throw new WorktreeError(
        unreachable ? 'repo-unreachable' : 'no-head',
        `cannot fetch the head of ${repo.repo} from ${remote.url}: ${lastLines(fetched.stderr)}` +
          (unreachable ? `; ${unreachableHint(repo)}` : ''),
        { retryable: false, repo: repo.repo },
      );
    }
    head = (await git(['rev-parse', `${HEAD_REF}^{commit}`], local)).trim();
  } else {
    const r = await runGit(['rev-parse', '--verify', '--quiet', 'HEAD^{commit}'], local);
    if (r.code !== 0) {
      throw new WorktreeError(
        'no-head',
        `the mirror of ${repo.repo} (${remote.url}) has no head commit (HEAD names no branch that exists); ` +
          `a use_patch instance is the repository's head plus its patch, so the mirror needs its default branch`,
        { retryable: false, repo: repo.repo },
      );
    }
    head = r.stdout.trim();
  }
  await git(['update-ref', HEAD_REF, head], local);
  return head;
}

/**
 * The commit whose tree is `base`'s with `patch` applied (`git apply --cached`, as CodeScout's `git apply`),
 * made once and kept under `refs/codegrep/patched/<base>/<sha256>`. A patch that does not apply fails with
 * `patch-failed` (not retryable: the same patch will not apply next time). Caller holds the lock.
 */
export async function ensurePatchedCommitLocked(
  repo: RepoName,
  bare: string,
  base: string,
  patch: BugPatch,
  opts: GitTimeouts,
): Promise<string> {
  const local = localOpts(bare, opts, repo);
  const ref = `${PATCHED_REF_PREFIX}/${base}/${patch.sha256}`;
  const existing = await runGit(['rev-parse', '--verify', '--quiet', `${ref}^{commit}`], local);
  if (existing.code === 0) return existing.stdout.trim();

  const tmp = path.join(bare, `codegrep-patch-${process.pid}-${randomBytes(4).toString('hex')}`);
  const index = `${tmp}.index`;
  const patchFile = `${tmp}.diff`;
  const env = { GIT_INDEX_FILE: index };
  try {
    await fs.writeFile(patchFile, patch.text);
    await git(['read-tree', base], { ...local, env });
    const applied = await runGit(['apply', '--cached', '--whitespace=nowarn', patchFile], { ...local, env });
    if (applied.code !== 0) {
      throw new WorktreeError(
        'patch-failed',
        `the bug patch (sha256 ${patch.sha256.slice(0, 12)}) does not apply to ${repo.repo}@${base}: ${lastLines(applied.stderr)}`,
        { retryable: false, repo: repo.repo, commit: base },
      );
    }
    const tree = (await git(['write-tree'], { ...local, env })).trim();
    const message = `codegrep: ${repo.repo}@${base} + bug patch sha256 ${patch.sha256}\n`;
    const commit = (await git(['commit-tree', tree, '-p', base, '-m', message], { ...local, env: PATCH_COMMIT_ENV })).trim();
    await git(['update-ref', ref, commit], local);
    return commit;
  } finally {
    await Promise.all([fs.rm(index, { force: true }), fs.rm(patchFile, { force: true }), fs.rm(`${index}.lock`, { force: true })]);
  }
}
