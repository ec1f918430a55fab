import path from 'node:path';
import { readRows } from '../artifacts';
import type { StoreSettings } from '../artifacts/store';
import { materializeAll } from '../worktrees';
import { HEAD_COMMIT, treeKey, type RepoSource, type WorktreeRequest, type WorktreeResult } from '../../schemas/worktrees';

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
  options: { repoSource: RepoSource; dataDir: string; storeSettings: StoreSettings; signal?: AbortSignal; concurrencyAcrossRepos?: number },
): Promise<NodeWorktrees> {
  const requests: WorktreeRequest[] = [];
  const seen = new Set<string>();
  for await (const record of readRows(samplesUri, options.storeSettings)) {
    if ('error' in record) continue;
    const row = record.row as Record<string, unknown>;
    if (typeof row.repo !== 'string' || typeof row.baseCommit !== 'string' || row.worktreePath === null || row.worktreePath === undefined)
      continue;
    const key = rowTreeKey(row)!;
    if (seen.has(key)) continue;
    seen.add(key);
    // A use_patch row is remade from its patch (the patched commit exists only where it was made).
    requests.push(
      typeof row.bugPatch === 'string' && typeof row.bugPatchSha256 === 'string'
        ? { repo: row.repo, commit: HEAD_COMMIT, bugPatch: { sha256: row.bugPatchSha256, text: row.bugPatch } }
        : { repo: row.repo, commit: row.baseCommit },
    );
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
    else byKey.set(treeKey(result), result.path);
  }
  return {
    worktreePath: (row) => byKey.get(rowTreeKey(row) ?? '') ?? null,
    results,
    failed,
  };
}

/** The tree a samples row needs (schemas/worktrees.ts treeKey); null for a row without repo and commit. */
function rowTreeKey(row: Record<string, unknown>): string | null {
  if (typeof row.repo !== 'string' || typeof row.baseCommit !== 'string') return null;
  return treeKey({
    repo: row.repo,
    commit: row.baseCommit,
    bugPatchSha256: typeof row.bugPatchSha256 === 'string' ? row.bugPatchSha256 : null,
  });
}
