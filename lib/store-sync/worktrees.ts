import path from 'node:path';
import { readRows } from '../artifacts';
import { materializeAll } from '../worktrees';
import type { RepoSource } from '../../schemas/worktrees';
import type { WorktreeResult } from '../../schemas/worktrees';

export interface NodeWorktrees {
  /** The node-local worktree of a samples row (by its repo and base commit), or null when it could not be made. */
  worktreePath: (row: Record<string, unknown>) => string | null;
  results: WorktreeResult[];
  /** Failures, `repo@commit: error`. */
  failed: string[];
}

/**
 * Materializes, on this node, the worktree of every environment samples row that had one on the CPU node
 * (README "Deployment: several machines"): the rows' `worktreePath` names the CPU node's paths, so a GPU node that shares no disk makes
 * its own `<dataDir>/worktrees/<owner>__<name>/<commit>` (bare clones in `<dataDir>/repos`) from the run's
 * `environment.repoSource`, and maps each row to it (loadEnvSamples' `worktreePath` option).
 */
export async function materializeSampleWorktrees(
  samplesUri: string,
  options: { repoSource: RepoSource; dataDir: string; signal?: AbortSignal; concurrencyAcrossRepos?: number },
): Promise<NodeWorktrees> {
  const requests: { repo: string; commit: string }[] = [];
  const seen = new Set<string>();
  for await (const record of readRows(samplesUri)) {
    if ('error' in record) continue;
    const row = record.row as Record<string, unknown>;
    if (typeof row.repo !== 'string' || typeof row.baseCommit !== 'string' || row.worktreePath === null || row.worktreePath === undefined)
      continue;
    const key = `${row.repo}@${row.baseCommit}`;
    if (seen.has(key)) continue;
    seen.add(key);
    requests.push({ repo: row.repo, commit: row.baseCommit });
  }
  const results = await materializeAll(requests, {
    source: options.repoSource,
    cacheDir: path.join(options.dataDir, 'repos'),
    worktreesDir: path.join(options.dataDir, 'worktrees'),
    concurrencyAcrossRepos: options.concurrencyAcrossRepos ?? 4,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const byKey = new Map<string, string>();
  const failed: string[] = [];
  for (const result of results) {
    if (result.status === 'failed') failed.push(`${result.repo}@${result.commit}: ${result.error}`);
    else byKey.set(`${result.repo}@${result.commit}`, result.path);
  }
  return {
    worktreePath: (row) =>
      typeof row.repo === 'string' && typeof row.baseCommit === 'string' ? (byKey.get(`${row.repo}@${row.baseCommit}`) ?? null) : null,
    results,
    failed,
  };
}
