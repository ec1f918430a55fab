import { DROPPED_LISTED, type BudgetSummary, type DroppedSample, type MaterializeSummary, type RunDisk } from '../../schemas/environment';
import { HEAD_COMMIT, REPO_SOURCE_CONFIG_KEY, treeKey, type WorktreeRequest, type WorktreeResult } from '../../schemas/worktrees';
import type { BudgetResult } from './budget';
import type { DiskSummary } from './disk-summary';

/** What the environment stage's worktrees step reports: requests from samples, dropped samples, summary, failure text. */

/**
 * One request per distinct tree of the samples (`treeKey`: repo@commit, or repo@HEAD+patch sha256 for a
 * use_patch sample), and the instance ids of each tree, in sample order.
 */
export async function worktreeRequests(
  samples: AsyncIterable<{
    instanceId: string;
    repo: string;
    baseCommit: string | null;
    bugPatch?: string | null;
    bugPatchSha256?: string | null;
  }>,
): Promise<{ requests: WorktreeRequest[]; samplesByCommit: Map<string, string[]> }> {
  const requests: WorktreeRequest[] = [];
  const samplesByCommit = new Map<string, string[]>();
  for await (const sample of samples) {
    const key = treeKey(sample);
    const ids = samplesByCommit.get(key);
    if (ids) ids.push(sample.instanceId);
    else {
      samplesByCommit.set(key, [sample.instanceId]);
      requests.push(
        sample.bugPatch && sample.bugPatchSha256
          ? { repo: sample.repo, commit: HEAD_COMMIT, bugPatch: { sha256: sample.bugPatchSha256, text: sample.bugPatch } }
          : { repo: sample.repo, commit: sample.baseCommit ?? '' },
      );
    }
  }
  return { requests, samplesByCommit };
}

/** The samples of every commit that could not be materialized, with the reason. */
export function droppedSamples(failures: readonly WorktreeResult[], samplesByCommit: ReadonlyMap<string, string[]>): DroppedSample[] {
  return failures.flatMap((r) =>
    (samplesByCommit.get(treeKey(r)) ?? []).map((instanceId) => ({
      instanceId,
      repo: r.repo,
      commit: r.commit,
      // Named first (mirror-missing, repo-unreachable, patch-failed, …), so drops can be counted by kind.
      reason: r.errorCode ? `${r.errorCode}: ${r.error ?? 'failed'}` : (r.error ?? 'failed'),
    })),
  );
}

export function unreachableRepos(results: readonly WorktreeResult[]): string[] {
  return [...new Set(results.filter((r) => r.status === 'failed').map((r) => `${r.repo}: ${r.error ?? 'failed'}`))];
}

export function materializeSummary(
  requests: readonly WorktreeRequest[],
  results: readonly WorktreeResult[],
  counts: { created: number; reused: number; repaired: number; failed: number },
  disk: DiskSummary,
  onUnavailable: MaterializeSummary['onUnavailable'],
  dropped: readonly DroppedSample[],
  run?: RunDisk,
  budget?: BudgetSummary | null,
): MaterializeSummary {
  const okMs = results
    .filter((r) => r.status !== 'failed')
    .map((r) => r.ms)
    .sort((a, b) => a - b);
  return {
    commits: results.length,
    ...counts,
    repos: new Set(requests.map((r) => r.repo)).size,
    medianMs: okMs.length > 0 ? okMs[Math.floor((okMs.length - 1) / 2)]! : null,
    ...(run ? { run } : {}),
    ...(budget !== undefined ? { budget } : {}),
    bareBytes: disk.bareBytes,
    worktreeBytes: disk.worktreeBytes,
    estimatedFullClonesBytes: disk.estimatedFullClonesBytes,
    savedRatio: Number.isFinite(disk.savedRatio) ? disk.savedRatio : null,
    unreachable: unreachableRepos(results),
    onUnavailable,
    droppedSamples: dropped.length,
    dropped: dropped.slice(0, DROPPED_LISTED),
  };
}

/**
 * Why the stage fails when commits could not be materialized: how many, which repositories, the first error,
 * and what to do (local mirrors, or `onUnavailable: skip`). Each hint once: the first error usually names the
 * config key for mirrors already.
 */
export function unavailableMessage(
  results: readonly WorktreeResult[],
  onUnavailable: MaterializeSummary['onUnavailable'],
  worktreesUri: string,
): string {
  const failures = results.filter((r) => r.status === 'failed');
  const allFailed = failures.length === results.length;
  const repos = [...new Set(failures.map((r) => r.repo))];
  const firstError = unreachableRepos(results)[0];
  const what = allFailed
    ? `no usable sample: none of the ${results.length} commits could be materialized`
    : `${failures.length} of ${results.length} commits could not be materialized`;
  const mirrors = firstError?.includes(REPO_SOURCE_CONFIG_KEY)
    ? 'Offline: `codegrep run --mirrors DIR`'
    : `Point ${REPO_SOURCE_CONFIG_KEY} at local mirrors ({ kind: mirror-dir, dir: <folder with <owner>__<name>.git> }, or \`codegrep run --mirrors DIR\`) when offline`;
  return (
    `${what} (${repos.length} repositories: ${repos.slice(0, 5).join(', ')}${repos.length > 5 ? ', …' : ''}). ` +
    `First error: ${firstError}. ` +
    `${mirrors}${onUnavailable === 'fail' ? `, or set environment.onUnavailable: skip to go on with the samples that can be materialized` : ''}. ` +
    `The rows of every commit are in ${worktreesUri}.`
  );
}

/** What the disk budget did over one materialization (every check it made), or null without a budget. */
export function budgetSummary(maxBytes: number | undefined, checks: readonly BudgetResult[]): BudgetSummary | null {
  if (maxBytes === undefined) return null;
  const last = checks.at(-1);
  return {
    maxBytes,
    removedWorktrees: checks.reduce((s, c) => s + c.removed.length, 0),
    removedBytes: checks.reduce((s, c) => s + c.removed.reduce((t, r) => t + r.bytes, 0), 0),
    bytesAfter: last?.bytesAfter ?? 0,
    overBudget: last?.overBudget ?? false,
  };
}
