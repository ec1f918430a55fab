import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DEFAULT_REPO_SOURCE, type RepoSource } from '../../schemas/worktrees';
import { ensureBareCloneLocked, ensureCommitLocked, localOpts, type CommitSource, type GitTimeouts } from './bare-clone';
import { diskUsage, isDirectoryNoFollow } from './disk-usage';
import { WorktreeError } from './errors';
import { git, runGit } from './git';
import { WORKTREE_MARKER, repoLockPath, worktreePath } from './layout';
import { withRepoLock, type LockOptions } from './repo-lock';
import { parseCommit, parseRepoName, type RepoName } from './repo-name';
import { parseRepoSource } from './repo-source';

export interface WorktreeOptions extends GitTimeouts {
  /** Where bare clones (and their locks) live; may be shared by several workers. */
  cacheDir: string;
  /** Where worktrees are made: `<worktreesDir>/<owner>__<name>/<commit>`. */
  worktreesDir: string;
  source?: RepoSource;
  lock?: LockOptions;
  /** Measure the checkout's disk bytes (a walk of the tree, once, when it is made); default true. */
  measureBytes?: boolean;
}

export interface EnsuredWorktree {
  repo: string;
  commit: string;
  path: string;
  status: 'created' | 'reused' | 'repaired';
  ms: number;
  bytes: number;
  /** How the commit was found in the bare clone; undefined when an existing worktree was reused. */
  commitSource?: CommitSource;
  /** Why an existing worktree was not trusted (status `repaired`). */
  repairReason?: string;
}

/**
 * A verified detached worktree of `repo` at `commit`. Idempotent: an existing worktree is reused only when
 * git lists it, its HEAD is the commit, `git status` is clean and the completion marker written after a
 * successful `worktree add` exists; anything else (a worker killed mid-add, edited or deleted files, a moved
 * HEAD, a tree orphaned by a re-clone) is removed and rebuilt. All of it runs under the repository's lock,
 * so concurrent requests for one commit make it once and the others reuse it.
 */
export async function ensureWorktree(repo: string, commit: string, opts: WorktreeOptions): Promise<EnsuredWorktree> {
  const name = parseRepoName(repo);
  const sha = parseCommit(commit, name.repo);
  const source = parseRepoSource(opts.source ?? DEFAULT_REPO_SOURCE);
  return withRepoLock(repoLockPath(opts.cacheDir, name), () => ensureWorktreeLocked(name, sha, source, opts), {
    ...opts.lock,
    signal: opts.signal,
  });
}

/**
 * Makes sure the repository's bare clone holds `commit`, with no checkout: what BM25 and dense need (they read the
 * commit's tree and blobs from the object database). `path` is the bare clone; status `reused` when the commit
 * was there, `created` when it was fetched. Under the repository's lock, like `ensureWorktree`.
 */
export async function ensureCommitInBareClone(repo: string, commit: string, opts: WorktreeOptions): Promise<EnsuredWorktree> {
  const name = parseRepoName(repo);
  const sha = parseCommit(commit, name.repo);
  const source = parseRepoSource(opts.source ?? DEFAULT_REPO_SOURCE);
  return withRepoLock(
    repoLockPath(opts.cacheDir, name),
    async () => {
      const started = performance.now();
      const { path: bare } = await ensureBareCloneLocked(name, source, opts.cacheDir, opts);
      const commitSource = await ensureCommitLocked(name, sha, bare, source, opts);
      const status = commitSource === 'present' ? 'reused' : 'created';
      return { repo: name.repo, commit: sha, path: bare, status, ms: performance.now() - started, bytes: 0, commitSource };
    },
    { ...opts.lock, signal: opts.signal },
  );
}

/** `ensureWorktree` for a caller that already holds the repository lock (lib/worktrees/patched.ts). */
export async function ensureWorktreeLocked(
  repo: RepoName,
  commit: string,
  source: RepoSource,
  opts: WorktreeOptions,
): Promise<EnsuredWorktree> {
  const started = performance.now();
  const { path: bare } = await ensureBareCloneLocked(repo, source, opts.cacheDir, opts);
  const wt = worktreePath(opts.worktreesDir, repo, commit);
  // Before any other git command: what a killed git left (a half-made admin entry, a lock file) makes the next one fail.
  await removeInterruptedAdds(bare, opts.worktreesDir);
  await removeStaleLocks(bare);

  const found = await inspectWorktree(bare, wt, commit, repo, opts);
  if (found.state === 'valid') {
    const now = new Date();
    await fs.utimes(found.marker, now, now);
    // A verified-clean tree has the bytes measured when it was made; no second walk.
    return { repo: repo.repo, commit, path: wt, status: 'reused', ms: performance.now() - started, bytes: found.bytes };
  }

  const commitSource = await ensureCommitLocked(repo, commit, bare, source, opts);
  if (found.state === 'broken') await removeWorktree(bare, wt, repo, opts);
  await fs.mkdir(path.dirname(wt), { recursive: true });
  await git(['worktree', 'add', '--quiet', '--detach', wt, commit], { ...localOpts(bare, opts, repo), commit });

  const [head = '', adminDir = ''] = (await git(['rev-parse', 'HEAD', '--absolute-git-dir'], localOpts(wt, opts, repo))).trim().split('\n');
  if (head !== commit) {
    throw new WorktreeError('git-failed', `git worktree add for ${repo.repo}@${commit} left HEAD at ${head} in ${wt}`, {
      retryable: true,
      repo: repo.repo,
      commit,
    });
  }
  const ms = performance.now() - started;
  const bytes = opts.measureBytes === false ? 0 : await diskUsage(wt);
  const marker = path.join(adminDir, WORKTREE_MARKER);
  const body: WorktreeMarker = { repo: repo.repo, commit, bytes, createdAt: new Date().toISOString() };
  await fs.writeFile(`${marker}.tmp`, JSON.stringify(body) + '\n');
  await fs.rename(`${marker}.tmp`, marker);

  return {
    repo: repo.repo,
    commit,
    path: wt,
    status: found.state === 'broken' ? 'repaired' : 'created',
    ms,
    bytes,
    commitSource,
    ...(found.state === 'broken' ? { repairReason: found.reason } : {}),
  };
}

/** Written into the worktree's admin dir once `worktree add` finished and HEAD was checked. */
interface WorktreeMarker {
  repo: string;
  commit: string;
  bytes: number;
  createdAt: string;
}

type Inspection = { state: 'absent' } | { state: 'valid'; marker: string; bytes: number } | { state: 'broken'; reason: string };

/** Decides whether the worktree at `wt` can be trusted; never changes anything. */
export async function inspectWorktree(bare: string, wt: string, commit: string, repo: RepoName, opts: GitTimeouts): Promise<Inspection> {
  const exists = await fs.lstat(wt).then(
    (st) => st,
    () => undefined,
  );
  const registered = await registeredWorktree(bare, wt, repo, opts);
  if (!exists && !registered) return { state: 'absent' };
  if (!exists) return { state: 'broken', reason: 'registered with git but the directory is gone' };
  if (!exists.isDirectory()) return { state: 'broken', reason: 'the path is not a directory' };
  if (!registered) return { state: 'broken', reason: 'the directory exists but git does not list it as a worktree' };
  if (registered.prunable) return { state: 'broken', reason: 'git lists it as prunable' };

  // hardened: a worktree's files come from an untrusted repository (and run checkouts from an agent).
  const local = { cwd: wt, timeoutMs: localOpts(wt, opts, repo).timeoutMs, signal: opts.signal, hardened: true };
  const revs = await runGit(['rev-parse', '--absolute-git-dir', '--git-common-dir', 'HEAD'], local);
  if (revs.code !== 0) return { state: 'broken', reason: `git rev-parse fails in it: ${revs.stderr.trim()}` };
  const [adminDir = '', commonDir = '', head = ''] = revs.stdout.trim().split('\n');
  if (!(await samePath(path.resolve(wt, commonDir), bare))) {
    return { state: 'broken', reason: `it belongs to another repository (${commonDir})` };
  }
  if (head !== commit) return { state: 'broken', reason: `HEAD is ${head}, not ${commit}` };

  const marker = path.join(adminDir, WORKTREE_MARKER);
  const markerBody = await fs.readFile(marker, 'utf8').catch(() => undefined);
  if (markerBody === undefined) return { state: 'broken', reason: 'no completion marker (worktree add did not finish)' };
  let marked: Partial<WorktreeMarker> = {};
  try {
    marked = JSON.parse(markerBody) as Partial<WorktreeMarker>;
  } catch {
    // an unreadable marker names no commit
  }
  if (marked.commit !== commit) return { state: 'broken', reason: 'the completion marker names another commit' };

  const status = await runGit(['status', '--porcelain', '--ignored'], local);
  if (status.code !== 0) return { state: 'broken', reason: `git status fails in it: ${status.stderr.trim()}` };
  if (status.stdout.trim() !== '') {
    const changed = status.stdout.trim().split('\n');
    return { state: 'broken', reason: `not clean: ${changed.slice(0, 3).join(', ')}${changed.length > 3 ? ', …' : ''}` };
  }
  return { state: 'valid', marker, bytes: typeof marked.bytes === 'number' ? marked.bytes : 0 };
}

interface ListedWorktree {
  path: string;
  head: string | undefined;
  prunable: boolean;
}

/** Parses `git worktree list --porcelain` of the bare repository. */
export async function listWorktrees(bare: string, repo: RepoName, opts: GitTimeouts): Promise<ListedWorktree[]> {
  const out = await git(['worktree', 'list', '--porcelain'], localOpts(bare, opts, repo));
  const listed: ListedWorktree[] = [];
  for (const block of out.split(/\n\n+/)) {
    const lines = block.split('\n').filter((l) => l !== '');
    const at = lines.find((l) => l.startsWith('worktree '));
    if (!at || lines.includes('bare')) continue;
    listed.push({
      path: at.slice('worktree '.length),
      head: lines.find((l) => l.startsWith('HEAD '))?.slice('HEAD '.length),
      prunable: lines.some((l) => l === 'prunable' || l.startsWith('prunable ')),
    });
  }
  return listed;
}

async function registeredWorktree(bare: string, wt: string, repo: RepoName, opts: GitTimeouts) {
  const listed = await listWorktrees(bare, repo, opts);
  for (const entry of listed) {
    if (await samePath(entry.path, wt)) return entry;
  }
  return undefined;
}

async function samePath(a: string, b: string): Promise<boolean> {
  if (path.resolve(a) === path.resolve(b)) return true;
  const [ra, rb] = await Promise.all([fs.realpath(a).catch(() => path.resolve(a)), fs.realpath(b).catch(() => path.resolve(b))]);
  return ra === rb;
}

/** Unregisters and deletes a worktree, whatever state it is in. */
export async function removeWorktree(bare: string, wt: string, repo: RepoName, opts: GitTimeouts): Promise<void> {
  const local = localOpts(bare, opts, repo);
  // Twice --force: also removes a locked worktree. Failure is fine: the rm and prune below finish the job.
  await runGit(['worktree', 'remove', '--force', '--force', wt], { ...local, hardened: true });
  await fs.rm(wt, { recursive: true, force: true });
  await git(['worktree', 'prune'], local);
  // `worktree add` locks its entry ("initializing") until the checkout ends; prune keeps locked entries, and
  // a killed add leaves one behind that would block the next add at this path. Drop entries that still
  // point at the removed path.
  const admin = path.join(bare, 'worktrees');
  for (const id of await fs.readdir(admin).catch(() => [] as string[])) {
    const gitdir = await fs.readFile(path.join(admin, id, 'gitdir'), 'utf8').catch(() => undefined);
    if (gitdir !== undefined && path.resolve(path.dirname(gitdir.trim())) === path.resolve(wt)) {
      await fs.rm(path.join(admin, id), { recursive: true, force: true });
    }
  }
}

/**
 * Removes what a killed `git worktree add` left in `<bare>/worktrees/`: an admin entry whose `gitdir`,
 * `commondir` or `HEAD` is missing or empty. `git worktree add` creates the entry and then writes those files
 * one by one; killed between creating `commondir` and writing it, it leaves an empty file on which every
 * `git worktree list`, `remove` and `prune` dies with `fatal: failed to read worktrees/<id>/commondir`
 * (BENCHMARKS.md "Chaos"), for every worktree of the repository. Caller holds the repository lock, so no `worktree add`
 * of ours is running: an incomplete entry is a dead one. Its half-made checkout goes too, but only when it
 * lies under `worktreesDir` and its `.git` file (if any) points back at this entry; complete entries and
 * other directories are never touched. Returns the entries removed.
 */
export async function removeInterruptedAdds(bare: string, worktreesDir: string): Promise<string[]> {
  const admin = path.join(bare, 'worktrees');
  const removed: string[] = [];
  const read = (file: string) =>
    fs.readFile(file, 'utf8').then(
      (text) => text.trim(),
      () => '',
    );
  for (const id of await fs.readdir(admin).catch(() => [] as string[])) {
    const entry = path.join(admin, id);
    if (!(await isDirectoryNoFollow(entry))) continue;
    const [gitdir = '', commondir = '', head = ''] = await Promise.all(
      ['gitdir', 'commondir', 'HEAD'].map((f) => read(path.join(entry, f))),
    );
    if (gitdir !== '' && commondir !== '' && head !== '') continue;
    if (gitdir !== '') {
      const checkout = path.dirname(path.resolve(gitdir));
      const inside = path.relative(path.resolve(worktreesDir), checkout);
      const pointer = await read(path.join(checkout, '.git'));
      const ours = pointer === '' || (await samePath(path.resolve(checkout, pointer.replace(/^gitdir:\s*/, '')), entry));
      if (inside !== '' && !inside.startsWith('..') && !path.isAbsolute(inside) && ours)
        await fs.rm(checkout, { recursive: true, force: true });
    }
    await fs.rm(entry, { recursive: true, force: true });
    removed.push(id);
  }
  return removed;
}

/** Lock files git creates while it changes a repository; a killed git leaves them, and the next one refuses to run. */
const GIT_LOCK_FILES = ['shallow.lock', 'packed-refs.lock', 'config.lock', 'HEAD.lock', 'FETCH_HEAD.lock', 'index.lock'];

/**
 * Removes the lock files a killed `git fetch` (or `clone`, `config`) left in the bare clone: `shallow.lock`
 * after a killed `fetch --depth=1` makes every later fetch die with "Unable to create '…/shallow.lock': File
 * exists" (found by lib/worktrees/worktree-kill.test.ts), and ref locks block updating those refs. Caller
 * holds the repository lock, so no git of ours is running in this repository: every lock is a dead one.
 * Only `*.lock` files are touched. Returns the paths removed (relative to the bare clone).
 */
export async function removeStaleLocks(bare: string): Promise<string[]> {
  const removed: string[] = [];
  const candidates = [...GIT_LOCK_FILES];
  const refs = path.join(bare, 'refs');
  for (const entry of (await fs.readdir(refs, { recursive: true }).catch(() => [] as string[])) as string[]) {
    if (entry.endsWith('.lock')) candidates.push(path.join('refs', entry));
  }
  for (const rel of candidates) {
    const file = path.join(bare, rel);
    if (
      await fs.lstat(file).then(
        (st) => st.isFile(),
        () => false,
      )
    ) {
      await fs.rm(file, { force: true });
      removed.push(rel);
    }
  }
  return removed;
}
