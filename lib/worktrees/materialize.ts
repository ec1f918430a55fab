import type { WorktreeRequest, WorktreeResult } from '../../schemas/worktrees';
import { DEFAULT_REPO_SOURCE, HEAD_COMMIT } from '../../schemas/worktrees';
import { ensureBareClone } from './bare-clone';
import { enforceWorktreeBudget, type BudgetResult } from './budget';
import { WorktreeError, errorCode, errorMessage } from './errors';
import { holdWorktrees, type WorktreeHold } from './holds';
import { worktreePath } from './layout';
import { ensurePatchedCommit, ensurePatchedWorktree, type BugPatch } from './patched';
import { parseCommit, parseRepoName, type RepoName } from './repo-name';
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
   * `environment.maxWorktreeBytes`: after each worktree it makes, the least recently used idle worktrees of
   * `worktreesDir` are removed until the checkouts fit (lib/worktrees/budget.ts). The worktrees this call
   * materializes are held (lib/worktrees/holds.ts) until it returns, so they are never among them.
   */
  maxWorktreeBytes?: number;
  onBudget?: (r: BudgetResult) => void;
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

  // Group by repository, deduplicating commits (and bug patches); bad names fail here without touching git.
  const byRepo = new Map<string, RepoWork>();
  requests.forEach((req, i) => {
    const key = `${i}`;
    try {
      const repo = parseRepoName(req.repo);
      const work = byRepo.get(repo.repo) ?? { commits: new Map<string, string[]>(), patches: new Map<string, PatchWork>() };
      byRepo.set(repo.repo, work);
      if (req.bugPatch) {
        const entry = work.patches.get(req.bugPatch.sha256) ?? { patch: req.bugPatch, keys: [] };
        work.patches.set(req.bugPatch.sha256, entry);
        entry.keys.push(key);
        return;
      }
      const commit = parseCommit(req.commit, repo.repo);
      work.commits.set(commit, [...(work.commits.get(commit) ?? []), key]);
    } catch (e) {
      record([key], failed(String(req.repo), String(req.commit), '', e, performance.now() - started, req.bugPatch?.sha256));
    }
  });

  // Every worktree this call makes or reuses is held until it returns: no budget (ours or another run's on
  // the same worktreesDir) prunes it meanwhile.
  const holds: WorktreeHold[] = [];
  let budgetChain: Promise<void> = Promise.resolve();
  const ready = async (made: { path: string; status: WorktreeResult['status'] }) => {
    holds.push(await holdWorktrees([made.path], opts));
    const maxBytes = opts.maxWorktreeBytes;
    if (maxBytes === undefined || made.status === 'reused') return;
    budgetChain = budgetChain.then(async () => {
      const r = await enforceWorktreeBudget({ ...opts, maxBytes });
      opts.onBudget?.(r);
    });
    await budgetChain;
  };

  const repos = [...byRepo.entries()];
  let next = 0;
  const worker = async () => {
    for (;;) {
      const item = repos[next++];
      if (!item) return;
      const [repo, work] = item;
      await materializeRepo(repo, work, opts, record, ready);
    }
  };
  const width = Math.max(1, Math.min(opts.concurrencyAcrossRepos ?? 4, repos.length));
  try {
    await Promise.all(Array.from({ length: width }, worker));
  } finally {
    await Promise.all(holds.map((h) => h.release()));
  }

  if (opts.signal?.aborted) {
    throw new WorktreeError('aborted', `materialization aborted after ${done} of ${total} requests`, { retryable: true });
  }
  return requests.map((req, i) => results.get(`${i}`) ?? failed(req.repo, req.commit, '', 'no result', 0, req.bugPatch?.sha256));
}

interface PatchWork {
  patch: BugPatch;
  keys: string[];
}
interface RepoWork {
  commits: Map<string, string[]>;
  /** use_patch trees of this repository's head, by patch sha256. */
  patches: Map<string, PatchWork>;
}

/** What the steps of one repository's materialization share: where results go, what a new worktree needs. */
interface RepoRun {
  repo: string;
  name: RepoName;
  opts: MaterializeOptions;
  record: (keys: string[], r: WorktreeResult) => void;
  ready: (made: { path: string; status: WorktreeResult['status'] }) => Promise<void>;
}

async function materializeRepo(
  repo: string,
  work: RepoWork,
  opts: MaterializeOptions,
  record: (keys: string[], r: WorktreeResult) => void,
  ready: (made: { path: string; status: WorktreeResult['status'] }) => Promise<void>,
): Promise<void> {
  const run: RepoRun = { repo, name: parseRepoName(repo), opts, record, ready };
  if (!(await cloneOrFailAll(run, work))) return;
  const unreachable = await materializeCommits(run, work.commits);
  await materializePatches(run, work.patches, unreachable);
}

/** Makes sure the bare clone exists; when it cannot be made, every request of the repository fails with its error. */
async function cloneOrFailAll({ repo, name, opts, record }: RepoRun, { commits, patches }: RepoWork): Promise<boolean> {
  const clone = performance.now();
  try {
    await ensureBareClone(repo, opts.source ?? DEFAULT_REPO_SOURCE, opts.cacheDir, opts);
    return true;
  } catch (e) {
    const ms = performance.now() - clone;
    for (const [commit, keys] of commits) record(keys, failed(repo, commit, worktreePath(opts.worktreesDir, name, commit), e, ms));
    for (const [sha, { keys }] of patches) record(keys, failed(repo, HEAD_COMMIT, '', e, ms, sha));
    return false;
  }
}

/** Records each commit's result; returns the error of a remote found unreachable, if one was. */
async function materializeCommits(run: RepoRun, commits: Map<string, string[]>): Promise<WorktreeError | null> {
  const { repo, name, opts, record } = run;
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
      record(keys, await materializeCommit(run, commit));
    } catch (e) {
      if (e instanceof WorktreeError && e.code === 'repo-unreachable') unreachable = e;
      record(keys, failed(repo, commit, worktreePath(opts.worktreesDir, name, commit), e, performance.now() - t0));
    }
  }
  return unreachable;
}

/** One commit: its worktree, or with `checkout: false` the commit in the bare clone. */
async function materializeCommit({ repo, opts, ready }: RepoRun, commit: string): Promise<WorktreeResult> {
  if (opts.checkout === false) {
    const c = await ensureCommitInBareClone(repo, commit, opts);
    return { ...NOT_PATCHED, repo, commit, path: c.path, status: c.status, ms: c.ms, bytes: c.bytes, error: null };
  }
  const w = await ensureWorktree(repo, commit, opts);
  await ready(w);
  return { ...NOT_PATCHED, repo, commit, path: w.path, status: w.status, ms: w.ms, bytes: w.bytes, error: null };
}

/** Records each bug patch's result; after an unreachable remote (from the commits or a patch) the rest fail with it. */
async function materializePatches(run: RepoRun, patches: Map<string, PatchWork>, unreachableBefore: WorktreeError | null): Promise<void> {
  const { repo, opts, record } = run;
  let unreachable = unreachableBefore;
  for (const [sha, { patch, keys }] of patches) {
    const t0 = performance.now();
    if (opts.signal?.aborted || unreachable) {
      record(keys, failed(repo, HEAD_COMMIT, '', unreachable ?? 'aborted', 0, sha));
      continue;
    }
    try {
      record(keys, await materializePatch(run, sha, patch, t0));
    } catch (e) {
      if (e instanceof WorktreeError && e.code === 'repo-unreachable') unreachable = e;
      record(keys, failed(repo, HEAD_COMMIT, '', e, performance.now() - t0, sha));
    }
  }
}

/** One bug patch applied to the head: its worktree, or with `checkout: false` the patched commit alone. */
async function materializePatch({ repo, opts, ready }: RepoRun, sha: string, patch: BugPatch, t0: number): Promise<WorktreeResult> {
  if (opts.checkout === false) {
    // No checkout: the patched commit in the bare clone is what BM25 and dense read.
    const c = await ensurePatchedCommit(repo, patch, opts);
    const ms = performance.now() - t0;
    return {
      ...NOT_PATCHED,
      repo,
      commit: c.commit,
      path: c.path,
      status: 'reused',
      ms,
      bytes: 0,
      error: null,
      bugPatchSha256: sha,
      patchedFrom: c.patchedFrom,
    };
  }
  const w = await ensurePatchedWorktree(repo, patch, opts);
  await ready(w);
  return {
    repo,
    commit: w.commit,
    path: w.path,
    status: w.status,
    ms: w.ms,
    bytes: w.bytes,
    error: null,
    errorCode: null,
    bugPatchSha256: sha,
    patchedFrom: w.patchedFrom,
  };
}

const NOT_PATCHED = { errorCode: null, bugPatchSha256: null, patchedFrom: null };

function failed(repo: string, commit: string, path: string, e: unknown, ms: number, bugPatchSha256?: string): WorktreeResult {
  return {
    repo,
    commit,
    path,
    status: 'failed',
    ms,
    bytes: 0,
    error: errorMessage(e),
    errorCode: errorCode(e),
    bugPatchSha256: bugPatchSha256 ?? null,
    patchedFrom: null,
  };
}
