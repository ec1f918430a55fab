import path from 'node:path';

/**
 * The node-local data directory of a GPU worker (README "Deployment: several machines"): where a training segment
 * and a policy server keep their run directory, bare clones and worktrees when the run has a store. The
 * `CODEGREP_DATA_DIR` environment variable; null when unset (they then use the run directory the workflow names,
 * as without a store). A worker reads it once at start (workers/create-worker.ts) and injects it into activities.
 */
export function nodeDataDir(env: Readonly<Record<string, string | undefined>>): string | null {
  return env.CODEGREP_DATA_DIR ? path.resolve(env.CODEGREP_DATA_DIR) : null;
}

/** The run directory a stage with a store works in on a node whose data dir is `dataDir`: `<dataDir>/<runId>`, else `runDir`. */
export function runDirOnNode(runDir: string, runId: string, dataDir: string | null): string {
  return dataDir ? path.join(dataDir, runId) : runDir;
}
