import type { WorktreeRequest, WorktreeResult } from '../../schemas/worktrees';
import { DEFAULT_REPO_SOURCE } from '../../schemas/worktrees';
import { ensureBareClone } from './bare-clone';
import { WorktreeError, errorMessage } from './errors';
import { worktreePath } from './layout';
import { parseCommit, parseRepoName } from './repo-name';
import { ensureCommitInBareClone, ensureWorktree, type WorktreeOptions } from './worktree';

export interface MaterializeProgress {
  done: number;
  total: number;
  result: WorktreeResult;
}

export interface MaterializeOptions extends WorktreeOptions {
  /** Repositories worked on at once (default 4). Within one repository, `worktree add` runs one at a time. */
  concurrencyAcrossRepos?: number;
  onProgress?: (p: MaterializeProgress) => void;
  /**
   * Make a worktree per commit (default true). False: only make sure each bare clone holds its commits (BM25 and
   * dense read from it); each result's `path` is then the bare clone.
   */
  checkout?: boolean;
}

/**
 * Materializes every (repo, commit), one result per request in request order. A failure stays in its row
 * (status `failed` with the error) and never loses the others; a repository that cannot be cloned fails all
 * its commits at once instead of trying again per commit. Duplicate requests share one result.
 * Rejects only when `signal` aborts.
 */
export async function materializeAll(requests: WorktreeRequest[], opts: MaterializeOptions): Promise<WorktreeResult[]> {
  const started = performance.now();
  const total = requests.length;
  const results = new Map<string, WorktreeResult>();
  let done = 0;
  const record = (keys: string[], result: WorktreeResult) => {
    for (const key of keys) {
      results.set(key, result);
      done += 1;
      opts.onProgress?.({ done, total, result });
    }
  };

  // Group by repository, deduplicating commits; bad names fail here without touching git.
  const byRepo = new Map<string, Map<string, string[]>>();
  requests.forEach((req, i) => {
    const key = `${i}`;
    try {
      const repo = parseRepoName(req.repo);
      const commit = parseCommit(req.commit, repo.repo);
      const commits = byRepo.get(repo.repo) ?? new Map<string, string[]>();
      byRepo.set(repo.repo, commits);
      commits.set(commit, [...(commits.get(commit) ?? []), key]);
    } catch (e) {
      record([key], failed(String(req.repo), String(req.commit), '', e, performance.now() - started));
    }
  });

  const repos = [...byRepo.entries()];
  let next = 0;
  const worker = async () => {
    for (;;) {
      const item = repos[next++];
      if (!item) return;
      const [repo, commits] = item;
      await materializeRepo(repo, commits, opts, record);
    }
  };
  const width = Math.max(1, Math.min(opts.concurrencyAcrossRepos ?? 4, repos.length));
  await Promise.all(Array.from({ length: width }, worker));

  if (opts.signal?.aborted) {
    throw new WorktreeError('aborted', `materialization aborted after ${done} of ${total} requests`, { retryable: true });
  }
  return requests.map((req, i) => results.get(`${i}`) ?? failed(req.repo, req.commit, '', 'no result', 0));
}

async function materializeRepo(
  repo: string,
  commits: Map<string, string[]>,
  opts: MaterializeOptions,
  record: (keys: string[], r: WorktreeResult) => void,
): Promise<void> {
  const name = parseRepoName(repo);
  const clone = performance.now();
  try {
    await ensureBareClone(repo, opts.source ?? DEFAULT_REPO_SOURCE, opts.cacheDir, opts);
  } catch (e) {
    const ms = performance.now() - clone;
    for (const [commit, keys] of commits) record(keys, failed(repo, commit, worktreePath(opts.worktreesDir, name, commit), e, ms));
    return;
  }
  // A repository that turns out unreachable at its first fetch fails its remaining commits with that error,
  // instead of asking the same dead remote once per commit.
  let unreachable: WorktreeError | null = null;
  for (const [commit, keys] of commits) {
    const t0 = performance.now();
    if (opts.signal?.aborted) {
      record(keys, failed(repo, commit, worktreePath(opts.worktreesDir, name, commit), 'aborted', 0));
      continue;
    }
    if (unreachable) {
      record(keys, failed(repo, commit, worktreePath(opts.worktreesDir, name, commit), unreachable, 0));
      continue;
    }
    try {
      const w = opts.checkout === false ? await ensureCommitInBareClone(repo, commit, opts) : await ensureWorktree(repo, commit, opts);
      record(keys, { repo, commit, path: w.path, status: w.status, ms: w.ms, bytes: w.bytes, error: null });
    } catch (e) {
      if (e instanceof WorktreeError && e.code === 'repo-unreachable') unreachable = e;
      record(keys, failed(repo, commit, worktreePath(opts.worktreesDir, name, commit), e, performance.now() - t0));
    }
  }
}

function failed(repo: string, commit: string, path: string, e: unknown, ms: number): WorktreeResult {
  return { repo, commit, path, status: 'failed', ms, bytes: 0, error: errorMessage(e) };
}
