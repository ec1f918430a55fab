import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { RepoSource } from '../../schemas/worktrees';
import { WorktreeError } from './errors';
import { git, lastLines, runGit } from './git';
import { CLONE_MARKER, bareRepoPath, cloneTempPrefix, repoLockPath } from './layout';
import { withRepoLock, type LockOptions } from './repo-lock';
import { parseCommit, parseRepoName, type RepoName } from './repo-name';
import { looksUnreachable, parseRepoSource, resolveRemote, unreachableHint } from './repo-source';

/** The one-time network step is bounded by 600 s (App. A.2); so is each later fetch. */
export const CLONE_TIMEOUT_MS = 600_000;
/** Local git commands (worktree add/list, status, cat-file). */
export const LOCAL_GIT_TIMEOUT_MS = 300_000;

export interface GitTimeouts {
  cloneTimeoutMs?: number;
  gitTimeoutMs?: number;
  signal?: AbortSignal;
}

export interface BareCloneResult {
  repo: string;
  path: string;
  status: 'cloned' | 'existing' | 'recloned';
  ms: number;
}

/**
 * One bare repository per repository, made atomically: made in a temp dir, marked complete, renamed into
 * place. A bare dir without the completion marker (made by a killed run or another tool) is removed and made
 * again; leftover temp dirs are removed. Takes the repository's lock.
 *
 * From a URL it starts **empty** (`git init --bare` with the URL as `origin`): `ensureCommitLocked` then
 * fetches exactly the base commits, `--depth=1` each, so a repository costs megabytes, not its whole history.
 * From a local mirror directory it is a `git clone --bare` (objects hard-linked on the same filesystem).
 */
export async function ensureBareClone(
  repo: string,
  source: RepoSource,
  cacheDir: string,
  opts: GitTimeouts & { lock?: LockOptions } = {},
): Promise<BareCloneResult> {
  const name = parseRepoName(repo);
  const src = parseRepoSource(source);
  return withRepoLock(repoLockPath(cacheDir, name), () => ensureBareCloneLocked(name, src, cacheDir, opts), {
    ...opts.lock,
    signal: opts.signal,
  });
}

/** Caller holds the repository lock. */
export async function ensureBareCloneLocked(
  repo: RepoName,
  source: RepoSource,
  cacheDir: string,
  opts: GitTimeouts,
): Promise<BareCloneResult> {
  const started = performance.now();
  const root = path.resolve(cacheDir);
  const bare = bareRepoPath(root, repo);
  await fs.mkdir(root, { recursive: true });
  await removeTempClones(root, repo);

  const state = await bareState(bare, opts);
  if (state === 'complete') return { repo: repo.repo, path: bare, status: 'existing', ms: performance.now() - started };
  if (state === 'half-made') await fs.rm(bare, { recursive: true, force: true });

  const remote = await resolveRemote(repo, source);
  const tmp = path.join(root, `${cloneTempPrefix(repo)}${process.pid}-${randomBytes(4).toString('hex')}`);
  try {
    if (remote.kind === 'url') {
      await git(['init', '--quiet', '--bare', tmp], {
        cwd: root,
        timeoutMs: opts.gitTimeoutMs ?? LOCAL_GIT_TIMEOUT_MS,
        signal: opts.signal,
        repo: repo.repo,
      });
      await git(['remote', 'add', 'origin', remote.url], localOpts(tmp, opts, repo));
      await writeCloneMarker(tmp, repo, remote.url, 'commits');
      await fs.rename(tmp, bare);
      return { repo: repo.repo, path: bare, status: state === 'half-made' ? 'recloned' : 'cloned', ms: performance.now() - started };
    }
    const r = await runGit(['clone', '--bare', '--quiet', '--', remote.url, tmp], {
      cwd: root,
      timeoutMs: opts.cloneTimeoutMs ?? CLONE_TIMEOUT_MS,
      signal: opts.signal,
    }).catch((e: unknown) => {
      if (e instanceof WorktreeError && e.code === 'git-timeout') {
        throw new WorktreeError(
          'git-timeout',
          `git clone --bare of ${repo.repo} from ${remote.url} timed out after ${opts.cloneTimeoutMs ?? CLONE_TIMEOUT_MS} ms`,
          { retryable: true, repo: repo.repo, cause: e },
        );
      }
      throw e;
    });
    if (r.code !== 0) {
      const why = lastLines(r.stderr);
      if (looksUnreachable(r.stderr)) {
        throw new WorktreeError('repo-unreachable', `cannot clone ${repo.repo} from ${remote.url}: ${why}; ${unreachableHint(repo)}`, {
          retryable: false,
          repo: repo.repo,
        });
      }
      throw new WorktreeError('git-failed', `git clone --bare of ${repo.repo} from ${remote.url} failed: ${why}`, {
        retryable: true,
        repo: repo.repo,
      });
    }
    // A bare clone has no fetch refspec; give it one so `fetch --all` brings new branches (a mirror of heads).
    await git(['config', 'remote.origin.fetch', '+refs/heads/*:refs/heads/*'], localOpts(tmp, opts, repo));
    await writeCloneMarker(tmp, repo, remote.url, 'clone');
    await fs.rename(tmp, bare);
  } finally {
    await fs.rm(tmp, { recursive: true, force: true });
  }
  return {
    repo: repo.repo,
    path: bare,
    status: state === 'half-made' ? 'recloned' : 'cloned',
    ms: performance.now() - started,
  };
}

/** `commits`: an empty repository that fetches base commits one by one; `clone`: a full clone of a mirror. */
async function writeCloneMarker(dir: string, repo: RepoName, url: string, mode: 'commits' | 'clone'): Promise<void> {
  await fs.writeFile(
    path.join(dir, CLONE_MARKER),
    JSON.stringify({ repo: repo.repo, url, mode, clonedAt: new Date().toISOString() }) + '\n',
  );
}

async function bareState(bare: string, opts: GitTimeouts): Promise<'absent' | 'complete' | 'half-made'> {
  try {
    await fs.lstat(bare);
  } catch {
    return 'absent';
  }
  try {
    await fs.access(path.join(bare, CLONE_MARKER));
  } catch {
    return 'half-made';
  }
  const r = await runGit(['rev-parse', '--is-bare-repository'], {
    cwd: bare,
    timeoutMs: opts.gitTimeoutMs ?? LOCAL_GIT_TIMEOUT_MS,
    signal: opts.signal,
  });
  return r.code === 0 && r.stdout.trim() === 'true' ? 'complete' : 'half-made';
}

async function removeTempClones(root: string, repo: RepoName): Promise<void> {
  const prefix = cloneTempPrefix(repo);
  for (const entry of await fs.readdir(root)) {
    if (entry.startsWith(prefix)) await fs.rm(path.join(root, entry), { recursive: true, force: true });
  }
}

export type CommitSource = 'present' | 'fetched-commit' | 'fetched-all';

/**
 * Makes sure `<commit>^{commit}` exists in the bare repository: `git cat-file -e` first, then
 * `fetch --depth=1 origin <commit>` (GitHub and any protocol-v2 server serve a reachable commit by id), and
 * only when the server refuses that, every branch and tag with their full history (`--unshallow` when earlier
 * shallow fetches left a shallow boundary) for servers that refuse unadvertised objects (App. A.2). Returns
 * how it was found. Caller holds the repository lock.
 */
export async function ensureCommitLocked(
  repo: RepoName,
  commit: string,
  bare: string,
  source: RepoSource,
  opts: GitTimeouts,
): Promise<CommitSource> {
  const sha = parseCommit(commit, repo.repo);
  const local = localOpts(bare, opts, repo);
  if (await hasCommit(sha, local)) return 'present';

  const remote = await resolveRemote(repo, source);
  const configured = await runGit(['config', '--get', 'remote.origin.url'], local);
  if (configured.stdout.trim() !== remote.url) {
    if (configured.code === 0) await git(['config', 'remote.origin.url', remote.url], local);
    else await git(['remote', 'add', 'origin', remote.url], local);
  }
  const unreachable = (stderr: string) =>
    new WorktreeError(
      'repo-unreachable',
      `commit ${sha} is not in the local clone of ${repo.repo} and ${remote.url} cannot be reached: ${lastLines(stderr)}; ${unreachableHint(repo)}`,
      { retryable: false, repo: repo.repo, commit: sha },
    );

  const network = { cwd: bare, timeoutMs: opts.cloneTimeoutMs ?? CLONE_TIMEOUT_MS, signal: opts.signal };
  // A mirror-dir clone has the history already: a missing commit is new, and fetching it shallow would cut
  // the history the clone shares with it. A URL repository holds base commits only, so depth 1 is all it needs.
  const depth = remote.kind === 'url' ? ['--depth=1'] : [];
  // Kept under refs/commits/<sha> (the compact-mirror layout): the commit stays reachable for gc, and the next
  // fetch tells the server it has it, so objects shared by two base commits travel once.
  const byCommit = await runGit([...ATOMIC_FETCH, 'fetch', '--quiet', ...depth, 'origin', `+${sha}:refs/commits/${sha}`], network);
  if (byCommit.code === 0 && (await hasCommit(sha, local))) return 'fetched-commit';
  if (byCommit.code !== 0 && looksUnreachable(byCommit.stderr)) throw unreachable(byCommit.stderr);

  await git(['config', 'remote.origin.fetch', '+refs/heads/*:refs/heads/*'], local);
  const shallow = await fs.access(path.join(bare, 'shallow')).then(
    () => true,
    () => false,
  );
  const all = await runGit([...ATOMIC_FETCH, 'fetch', '--quiet', ...(shallow ? ['--unshallow'] : []), '--tags', 'origin'], network);
  if (await hasCommit(sha, local)) return 'fetched-all';
  if (all.code !== 0 && looksUnreachable(all.stderr)) throw unreachable(all.stderr);
  throw new WorktreeError(
    'commit-missing',
    `commit ${sha} not found in ${repo.repo} (${remote.url}), neither by \`fetch --depth=1 ${sha}\` ` +
      `(${byCommit.code === 0 ? 'fetched, but no such commit' : lastLines(byCommit.stderr, 2)}) nor by fetching every branch and tag` +
      `${all.code === 0 ? '' : ` (${lastLines(all.stderr, 2)})`}`,
    { retryable: false, repo: repo.repo, commit: sha },
  );
}

/**
 * `git fetch` keeps what it receives as one pack, never as loose objects. Below `fetch.unpackLimit` (100 objects)
 * git unpacks a fetch into loose objects one at a time, commit first: a fetch killed midway (a killed worker's
 * git) then leaves the commit present without its tree, and `worktree add` fails with "unable to read tree". A
 * pack becomes visible whole, when its index is renamed into place.
 */
export const ATOMIC_FETCH = ['-c', 'fetch.unpackLimit=1'] as const;

async function hasCommit(sha: string, local: ReturnType<typeof localOpts>): Promise<boolean> {
  const r = await runGit(['cat-file', '-e', `${sha}^{commit}`], local);
  return r.code === 0;
}

export function localOpts(cwd: string, opts: GitTimeouts, repo: RepoName) {
  return { cwd, timeoutMs: opts.gitTimeoutMs ?? LOCAL_GIT_TIMEOUT_MS, signal: opts.signal, repo: repo.repo };
}
