import { promises as fs } from 'node:fs';
import path from 'node:path';
import { diskUsage, isDirectoryNoFollow } from './disk-usage';
import { CLONE_MARKER } from './layout';
import { parseRepoName, repoFromSlug, type RepoName } from './repo-name';

export interface RepoDisk {
  repo: string;
  bareBytes: number;
  worktrees: number;
  worktreeBytes: number;
}

export interface DiskSummary {
  /** Bare clones as they are on disk, including the per-worktree admin dirs (index, HEAD) git keeps there. */
  bareBytes: number;
  /** The checkouts. */
  worktreeBytes: number;
  worktrees: number;
  /** N full clones instead (§3.3: N · repo_size): per worktree, its repository's object store + its checkout + its index. */
  estimatedFullClonesBytes: number;
  /** 1 − (bareBytes + worktreeBytes) / estimatedFullClonesBytes; 0 with no worktrees. */
  savedRatio: number;
  repos: RepoDisk[];
}

/**
 * What the shared-object layout costs on disk against one full clone per commit (§3.3: repo_size +
 * N · worktree_size instead of N · repo_size). Walks like `du`: symlinks not followed, each inode counted
 * once across the whole summary.
 */
export async function diskSummary(opts: { cacheDir: string; worktreesDir: string }): Promise<DiskSummary> {
  const seen = new Set<string>();
  const cacheDir = path.resolve(opts.cacheDir);
  const worktreesDir = path.resolve(opts.worktreesDir);
  const repos: RepoDisk[] = [];
  let estimate = 0;

  const entries = await fs.readdir(cacheDir).catch(() => [] as string[]);
  const slugs = new Set<string>();
  for (const e of entries) if (e.endsWith('.git') && !e.startsWith('.')) slugs.add(e.slice(0, -'.git'.length));
  for (const e of await fs.readdir(worktreesDir).catch(() => [] as string[])) slugs.add(e);

  for (const slug of [...slugs].sort()) {
    const repo = repoFromSlug(slug);
    if (!repo) continue;
    const bare = path.join(cacheDir, `${slug}.git`);
    const hasBare = await fs.access(path.join(bare, CLONE_MARKER)).then(
      () => true,
      () => false,
    );
    const adminDir = path.join(bare, 'worktrees');
    // Admin dirs hold one index per worktree: part of each checkout's cost, not of the shared object store.
    const storeBytes = hasBare ? await diskUsage(bare, { seen, exclude: new Set([adminDir]) }) : 0;
    const adminBytes = hasBare ? await diskUsage(adminDir, { seen }) : 0;

    const trees = path.join(worktreesDir, slug);
    let worktrees = 0;
    let worktreeBytes = 0;
    for (const commit of await fs.readdir(trees).catch(() => [] as string[])) {
      const dir = path.join(trees, commit);
      if (!(await isDirectoryNoFollow(dir))) continue;
      worktrees += 1;
      worktreeBytes += await diskUsage(dir, { seen });
    }
    repos.push({ repo: repo.repo, bareBytes: storeBytes + adminBytes, worktrees, worktreeBytes });
    estimate += worktrees * storeBytes + adminBytes + worktreeBytes;
  }

  const bareBytes = repos.reduce((s, r) => s + r.bareBytes, 0);
  const worktreeBytes = repos.reduce((s, r) => s + r.worktreeBytes, 0);
  const worktrees = repos.reduce((s, r) => s + r.worktrees, 0);
  return {
    bareBytes,
    worktreeBytes,
    worktrees,
    estimatedFullClonesBytes: estimate,
    savedRatio: estimate > 0 ? 1 - (bareBytes + worktreeBytes) / estimate : 0,
    repos,
  };
}

/**
 * The disk of one run's trees, beside the shared folders' figures (diskSummary): the distinct worktrees of
 * `results` that exist, their checkout bytes as measured when made, and the bare repositories they belong to.
 */
export async function runDiskSummary(
  results: readonly { repo: string; path: string; status: string; bytes: number }[],
  opts: { cacheDir: string },
): Promise<{ worktrees: number; worktreeBytes: number; repos: number; bareBytes: number }> {
  const byPath = new Map<string, number>();
  const repos = new Set<string>();
  for (const r of results) {
    if (r.status === 'failed' || r.path === '') continue;
    byPath.set(path.resolve(r.path), r.bytes);
    repos.add(r.repo);
  }
  const seen = new Set<string>();
  let bareBytes = 0;
  for (const repo of [...repos].sort()) {
    let name: RepoName;
    try {
      name = parseRepoName(repo);
    } catch {
      continue;
    }
    bareBytes += await diskUsage(path.join(path.resolve(opts.cacheDir), `${name.slug}.git`), { seen });
  }
  return {
    worktrees: byPath.size,
    worktreeBytes: [...byPath.values()].reduce((s, b) => s + b, 0),
    repos: repos.size,
    bareBytes,
  };
}
