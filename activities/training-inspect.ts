import { inspectRun } from '../lib/training';

/** What a training run left (this node's disk, or the run store): where a new workflow on the same run continues from. */
export async function inspectTrainingRun(input: { runDir: string; runId?: string; store?: string }) {
  return inspectRun(input);
}
