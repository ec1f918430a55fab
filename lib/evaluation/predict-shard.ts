import { scoreInstance } from '../reports';
import type { Predictor } from '../retrievers/predictors';
import type { EvaluationPrediction, FileTarget, InstanceMetrics } from '../../schemas/evaluation';
import type { EvaluationInstance } from './instances';

export type ScoredPrediction = EvaluationPrediction & InstanceMetrics;

/** Runs `task` over `items` with at most `limit` in flight; results in input order; the first failure is rethrown once all started tasks settled. */
export async function mapWithConcurrency<T, R>(items: readonly T[], limit: number, task: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let failure: { error: unknown } | null = null;
  const worker = async () => {
    while (failure === null && next < items.length) {
      const i = next++;
      try {
        results[i] = await task(items[i]!);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  if (failure) throw (failure as { error: unknown }).error;
  return results;
}

/**
 * Predicts every instance of a shard (at the predictor's own concurrency), times each prediction, and scores it
 * against the instance's ground truth. `onScored` gets the number of instances done so far.
 */
export function predictAndScore(
  shard: readonly EvaluationInstance[],
  predictor: Predictor,
  fileTarget: FileTarget,
  onScored: (done: number) => void,
): Promise<ScoredPrediction[]> {
  let done = 0;
  predictor.upcoming?.(shard);
  return mapWithConcurrency(shard, predictor.concurrency, async (instance) => {
    const t0 = performance.now();
    const prediction = await predictor.predict(instance);
    prediction.ms = performance.now() - t0;
    const metrics = scoreInstance(prediction, instance.truth, fileTarget);
    onScored(++done);
    return { ...prediction, ...metrics };
  });
}
