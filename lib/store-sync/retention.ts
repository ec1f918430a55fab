import type { ArtifactStore } from '../artifacts/store';
import type { RunLease } from './fencing';
import { storeTraining } from './layout';

/**
 * How many checkpoints the trainer keeps when `training.keepCheckpoints` is unset (trainer/config.py
 * `keep_checkpoints`); the store keeps as many, so it holds what a node's disk would.
 */
export const TRAINER_DEFAULT_KEEP_CHECKPOINTS = 3;

export interface RetentionPolicy {
  /** The newest this many checkpoints stay (training.keepCheckpoints). */
  keepCheckpoints: number;
  /** Steps that stay whatever their age (e.g. checkpoints a report or an evaluation names). */
  keepSteps?: Iterable<number>;
  /** The best checkpoint of validation: always kept. */
  bestStep?: number | null;
}

/** The stored checkpoint steps to delete under `policy`: all but the newest `keepCheckpoints`, `keepSteps` and `bestStep`. Ascending. */
export function checkpointsToDelete(steps: readonly number[], policy: RetentionPolicy): number[] {
  if (!Number.isInteger(policy.keepCheckpoints) || policy.keepCheckpoints < 1)
    throw new RangeError(`keepCheckpoints must be a positive integer, got ${policy.keepCheckpoints}`);
  const sorted = [...new Set(steps)].sort((a, b) => a - b);
  const kept = new Set([...sorted.slice(-policy.keepCheckpoints), ...(policy.keepSteps ?? [])]);
  if (policy.bestStep !== undefined && policy.bestStep !== null) kept.add(policy.bestStep);
  return sorted.filter((step) => !kept.has(step));
}

/**
 * Deletes a stored checkpoint: its marker first, so a reader never finds a marker whose files are gone, then
 * its files. Under the lease (checked first), so a fenced writer deletes nothing.
 */
export async function deleteStoredCheckpoint(store: ArtifactStore, runId: string, step: number, lease: RunLease): Promise<number> {
  const keys = storeTraining(runId);
  await lease.check(`deleting checkpoint ${step}`);
  await store.delete(keys.marker(step));
  const files = await store.list(`${keys.checkpoint(step)}/`);
  for (const file of files) await store.delete(file.key);
  return files.length;
}
