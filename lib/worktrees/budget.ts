import { promises as fs } from 'node:fs';
import path from 'node:path';
import { localOpts, type GitTimeouts } from './bare-clone';
import { diskUsage } from './disk-usage';
import { errorMessage } from './errors';
import { git } from './git';
import { isHeld } from './holds';
import { CLONE_MARKER, WORKTREE_MARKER, bareRepoPath, repoLockPath } from './layout';
import { withRepoLock, type LockOptions } from './repo-lock';
import { repoFromSlug, type RepoName } from './repo-name';
import { removeWorktree } from './worktree';

/**
 * `environment.maxWorktreeBytes`: a disk budget for the checkouts under `worktreesDir`. Over many commits the
 * worktrees take tens of GB (one checkout per commit, App. A.2); the budget keeps their total under a limit by
 * removing the least recently used worktrees that nobody uses. "Used" is the completion marker's mtime, set
 * when the worktree is made and touched each time it is reused (lib/worktrees/worktree.ts). A worktree that a
 * live hold names (lib/worktrees/holds.ts: an activity working in it) or that `keep` names is never removed;
 * when those alone exceed the budget the result says so (`overBudget`) and nothing else is touched.
 * Bytes are the checkout's, as measured when it was made (the marker's `bytes`; a walk for one without).
 */
export interface BudgetOptions extends GitTimeouts {
  cacheDir: string;
  worktreesDir: string;
  maxBytes: number;
  /** Worktree paths never removed (besides held ones), e.g. those the caller is materializing. */
  keep?: ReadonlySet<string>;
  lock?: LockOptions;
}

export interface BudgetResult {
  maxBytes: number;
  bytesBefore: number;
  bytesAfter: number;
  removed: { repo: string; commit: string; path: string; bytes: number; lastUsed: string }[];
  /** Still over the budget after removing every idle worktree: the rest are held or kept. */
  overBudget: boolean;
  failed: { path: string; error: string }[];
}

interface ListedWorktree {
  repo: RepoName;
  commit: string;
  path: string;
  bytes: number;
  lastUsedMs: number;
}

export async function enforceWorktreeBudget(opts: BudgetOptions): Promise<BudgetResult> {
  const listed = await listWorktreeUsage(opts.worktreesDir);
  const bytesBefore = listed.reduce((s, w) => s + w.bytes, 0);
  const result: BudgetResult = {
    maxBytes: opts.maxBytes,
    bytesBefore,
    bytesAfter: bytesBefore,
    removed: [],
    overBudget: false,
    failed: [],
  };
  if (bytesBefore <= opts.maxBytes) return result;

  const keep = new Set([...(opts.keep ?? [])].map((p) => path.resolve(p)));
  const oldestFirst = listed.filter((w) => !keep.has(w.path)).sort((a, b) => a.lastUsedMs - b.lastUsedMs || (a.path < b.path ? -1 : 1));
  for (const w of oldestFirst) {
    if (result.bytesAfter <= opts.maxBytes) break;
    try {
      const removed = await withRepoLock(
        repoLockPath(opts.cacheDir, w.repo),
        async () => {
          // Under the lock: a hold taken since the listing, or a reuse that touched the marker, keeps it.
          if (await isHeld(w.path)) return false;
          const now = await usage(w.path);
          if (now !== undefined && now.lastUsedMs > w.lastUsedMs) return false;
          const bare = bareRepoPath(opts.cacheDir, w.repo);
          const hasBare = await fs.access(path.join(bare, CLONE_MARKER)).then(
            () => true,
            () => false,
          );
          if (hasBare) {
            await removeWorktree(bare, w.path, w.repo, opts);
            await git(['worktree', 'prune'], localOpts(bare, opts, w.repo));
          } else await fs.rm(w.path, { recursive: true, force: true });
          return true;
        },
        { ...opts.lock, signal: opts.signal },
      );
      if (!removed) continue;
      result.bytesAfter -= w.bytes;
      result.removed.push({
        repo: w.repo.repo,
        commit: w.commit,
        path: w.path,
        bytes: w.bytes,
        lastUsed: new Date(w.lastUsedMs).toISOString(),
      });
      await fs.rmdir(path.dirname(w.path)).catch(() => undefined); // the repository's folder, once empty
    } catch (e) {
      result.failed.push({ path: w.path, error: errorMessage(e) });
    }
  }
  result.overBudget = result.bytesAfter > opts.maxBytes;
  return result;
}

/** Every worktree under `worktreesDir` with its bytes and last use (`<worktreesDir>/<owner>__<name>/<commit>`). */
export async function listWorktreeUsage(worktreesDir: string): Promise<ListedWorktree[]> {
  const root = path.resolve(worktreesDir);
  const out: ListedWorktree[] = [];
  for (const slug of (await fs.readdir(root).catch(() => [] as string[])).sort()) {
    const repo = repoFromSlug(slug);
    if (!repo) continue;
    for (const commit of (await fs.readdir(path.join(root, slug)).catch(() => [] as string[])).sort()) {
      const wt = path.join(root, slug, commit);
      const st = await fs.lstat(wt).catch(() => undefined);
      if (!st?.isDirectory()) continue;
      const found = await usage(wt);
      out.push({
        repo,
        commit,
        path: wt,
        bytes: found?.bytes ?? (await diskUsage(wt)),
        // A half-made worktree (no marker) is the least recently used of all.
        lastUsedMs: found?.lastUsedMs ?? 0,
      });
    }
  }
  return out;
}

/** The completion marker's bytes and mtime, found through the worktree's `.git` file; undefined without one. */
async function usage(wt: string): Promise<{ bytes: number | undefined; lastUsedMs: number } | undefined> {
  const dotGit = await fs.readFile(path.join(wt, '.git'), 'utf8').catch(() => undefined);
  const gitdir = dotGit?.match(/^gitdir:\s*(.+)$/m)?.[1]?.trim();
  if (!gitdir) return undefined;
  const marker = path.join(path.resolve(wt, gitdir), WORKTREE_MARKER);
  const [st, text] = await Promise.all([fs.stat(marker).catch(() => undefined), fs.readFile(marker, 'utf8').catch(() => '')]);
  if (st === undefined) return undefined;
  let bytes: number | undefined;
  try {
    const parsed = (JSON.parse(text) as { bytes?: unknown }).bytes;
    bytes = typeof parsed === 'number' ? parsed : undefined;
  } catch {
    bytes = undefined;
  }
  return { bytes, lastUsedMs: st.mtimeMs };
}
