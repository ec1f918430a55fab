import path from 'node:path';

/**
 * The node-local data directory of a GPU worker (README "Deployment: several machines"): where a training segment keeps its run directory,
 * bare clones and worktrees when the run has a store. Set by `createGpuWorker({ dataDir })`, else the
 * `CODEGREP_DATA_DIR` environment variable; null when neither is set (the segment then uses the run directory
 * the workflow names, as without a store).
 */
let override: string | null = null;

export function setNodeDataDir(dir: string | null | undefined): void {
  override = dir ? path.resolve(dir) : null;
}

export function nodeDataDir(env: NodeJS.ProcessEnv = process.env): string | null {
  if (override) return override;
  return env.CODEGREP_DATA_DIR ? path.resolve(env.CODEGREP_DATA_DIR) : null;
}

/** The run directory a segment with a store works in on this node: `<node data dir>/<runId>`, else `runDir`. */
export function nodeRunDir(runDir: string, runId: string, env: NodeJS.ProcessEnv = process.env): string {
  const dir = nodeDataDir(env);
  return dir ? path.join(dir, runId) : runDir;
}
