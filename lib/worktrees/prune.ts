import { promises as fs } from 'node:fs';
import path from 'node:path';
import { localOpts, type GitTimeouts } from './bare-clone';
import { errorMessage } from './errors';
import { git } from './git';
import { isHeld } from './holds';
import { CLONE_MARKER, WORKTREE_MARKER, bareRepoPath, cloneTempPrefix, repoLockPath } from './layout';
import { withRepoLock, type LockOptions } from './repo-lock';
import { repoFromSlug, worktreeKey, type RepoName } from './repo-name';
import { removeWorktree } from './worktree';

export interface PruneOptions extends GitTimeouts {
  cacheDir: string;
  worktreesDir: string;
  /** Remove only worktrees last materialized or reused longer ago than this; all of them when omitted. */
  olderThanMs?: number;
  /** Worktrees never removed, named by path or by `owner/name@commit` (`worktreeKey`). */
  keep?: ReadonlySet<string>;
  lock?: LockOptions;
  now?: number;
}

export interface PruneResult {
  removed: { repo: string; commit: string; path: string; reason: string }[];
  kept: number;
  failed: { path: string; error: string }[];
}

/**
 * Removes worktrees (unkept, unheld and old enough, plus any half-made one, whatever its age), then runs
 * `git worktree prune` and clears leftover temp clones in every bare repository. Each repository is
 * handled under its lock, so a worktree being created is never mistaken for a half-made one.
 * Age is the time since the completion marker was last touched (created or reused).
 */
export async function pruneWorktrees(opts: PruneOptions): Promise<PruneResult> {
  const now = opts.now ?? Date.now();
  const cacheDir = path.resolve(opts.cacheDir);
  const worktreesDir = path.resolve(opts.worktreesDir);
  const result: PruneResult = { removed: [], kept: 0, failed: [] };

  const slugs = new Set<string>();
  for (const e of await fs.readdir(worktreesDir).catch(() => [] as string[])) slugs.add(e);
  for (const e of await fs.readdir(cacheDir).catch(() => [] as string[])) {
    if (e.endsWith('.git') && !e.startsWith('.')) slugs.add(e.slice(0, -'.git'.length));
  }

  for (const slug of [...slugs].sort()) {
    const repo = repoFromSlug(slug);
    if (!repo) continue;
    try {
      await withRepoLock(repoLockPath(cacheDir, repo), () => pruneRepo(repo, cacheDir, worktreesDir, now, opts, result), {
        ...opts.lock,
        signal: opts.signal,
      });
    } catch (e) {
      result.failed.push({ path: path.join(worktreesDir, slug), error: errorMessage(e) });
    }
  }
  return result;
}

async function pruneRepo(
  repo: RepoName,
  cacheDir: string,
  worktreesDir: string,
  now: number,
  opts: PruneOptions,
  result: PruneResult,
): Promise<void> {
  const bare = bareRepoPath(cacheDir, repo);
  const hasBare = await fs.access(path.join(bare, CLONE_MARKER)).then(
    () => true,
    () => false,
  );
  const trees = path.join(worktreesDir, repo.slug);

  for (const commit of (await fs.readdir(trees).catch(() => [] as string[])).sort()) {
    const wt = path.join(trees, commit);
    if (opts.keep?.has(wt) || opts.keep?.has(worktreeKey(repo.repo, commit))) {
      result.kept += 1;
      continue;
    }
    // An activity works in it (lib/worktrees/holds.ts): never removed from under it.
    if (await isHeld(wt)) {
      result.kept += 1;
      continue;
    }
    const markedAt = await markerTime(wt);
    const reason =
      markedAt === undefined
        ? 'half-made (no completion marker)'
        : opts.olderThanMs === undefined
          ? 'not kept'
          : now - markedAt > opts.olderThanMs
            ? `unused for ${Math.round((now - markedAt) / 1000)} s`
            : undefined;
    if (reason === undefined) {
      result.kept += 1;
      continue;
    }
    try {
      if (hasBare) await removeWorktree(bare, wt, repo, opts);
      else await fs.rm(wt, { recursive: true, force: true });
      result.removed.push({ repo: repo.repo, commit, path: wt, reason });
    } catch (e) {
      result.failed.push({ path: wt, error: errorMessage(e) });
    }
  }
  await fs.rmdir(trees).catch(() => undefined); // only when empty

  const prefix = cloneTempPrefix(repo);
  for (const e of await fs.readdir(cacheDir).catch(() => [] as string[])) {
    if (e.startsWith(prefix)) await fs.rm(path.join(cacheDir, e), { recursive: true, force: true });
  }
  if (hasBare) await git(['worktree', 'prune'], localOpts(bare, opts, repo));
}

/** mtime of the worktree's completion marker, found through its `.git` file; undefined when there is none. */
async function markerTime(wt: string): Promise<number | undefined> {
  const dotGit = await fs.readFile(path.join(wt, '.git'), 'utf8').catch(() => undefined);
  const gitdir = dotGit?.match(/^gitdir:\s*(.+)$/m)?.[1]?.trim();
  if (!gitdir) return undefined;
  const st = await fs.stat(path.join(path.resolve(wt, gitdir), WORKTREE_MARKER)).catch(() => undefined);
  return st?.mtimeMs;
}
