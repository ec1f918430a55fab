import { inspectRun } from '../lib/training';
import type { ActivityDeps } from './kit';

/**
 * What a training run left (this node's disk, or the run store, reached with the worker's store settings): where
 * a new workflow on the same run continues from.
 */
export function makeInspectTrainingRun(deps: Pick<ActivityDeps, 'store'>) {
  return async (input: { runDir: string; runId?: string; store?: string }) => inspectRun(input, deps.store);
}
