import path from 'node:path';
import { ApplicationFailure, Context, log } from '@temporalio/activity';
import { findCachedArtifact, hashConfig, readRows, writeParquetArtifact } from '../lib/artifacts';
import { scoreInstance } from '../lib/reports';
import {
  EVALUATION_SCHEMA_VERSION,
  EVALUATION_SHARD_SCHEMA_NAME,
  EvaluateShardInputSchema,
  evaluationShardArrowSchema,
  type EvaluateShardInput,
  type EvaluateShardOutput,
  type EvaluationPrediction,
  type InstanceMetrics,
} from '../schemas/evaluation';
import { loadEvaluationInstances, shardFileName, shardOf, type EvaluationInstance } from './evaluation-instances';
import { openPredictor } from './evaluation-retrievers';
import { ProgressReporter } from './kit';

/** Runs `task` over `items` with at most `limit` in flight; results in input order; the first failure is rethrown once all started tasks settled. */
async function mapWithConcurrency<T, R>(items: readonly T[], limit: number, task: (item: T) => Promise<R>): Promise<R[]> {
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

async function countFailed(uri: string): Promise<number> {
  let failed = 0;
  for await (const record of readRows(uri)) if (!('error' in record) && (record.row as { failed?: unknown }).failed === true) failed++;
  return failed;
}

/**
 * One (retriever, shard) of the evaluation: predict every instance of the shard, score it against its ground
 * truth, and write the shard's rows (prediction + scores) as one Parquet artifact. A shard whose artifact
 * matches its plan and inputs is a cache hit, so after a killed worker only unfinished shards are redone.
 */
export async function evaluateShard(rawInput: EvaluateShardInput): Promise<EvaluateShardOutput> {
  const input = EvaluateShardInputSchema.parse(rawInput);
  const started = Date.now();
  const plan = input.retriever;
  const retriever = input.evaluation.retrievers.find((r) => r.name === plan.name);
  if (!retriever) throw ApplicationFailure.create({ type: 'InvalidInput', nonRetryable: true, message: `retriever "${plan.name}" is not in evaluation.retrievers` });
  const shardPath = path.join(plan.shardDir, shardFileName(input.shardIndex, input.shardCount));
  const inputs = [input.samples, ...plan.inputs];
  const configHash = hashConfig({ stage: 'evaluation-shard', planHash: plan.planHash, shardIndex: input.shardIndex, shardCount: input.shardCount });
  const expectation = { schemaName: EVALUATION_SHARD_SCHEMA_NAME, schemaVersion: EVALUATION_SCHEMA_VERSION, inputs, configHash };

  const cached = await findCachedArtifact(shardPath, expectation);
  if (cached) {
    log.info('evaluation shard: cache hit', { retriever: plan.name, shard: input.shardIndex });
    return { retriever: plan.name, shardIndex: input.shardIndex, shard: cached, cached: true, instances: cached.rows, failed: await countFailed(cached.uri), ms: Date.now() - started };
  }

  const loaded = await loadEvaluationInstances(input.samples.uri, input.evaluation.instances);
  const shard = shardOf(loaded.instances, input.evaluation.shardSize, input.shardIndex);
  // Heartbeats carry the shard's progress to the CLI and the UI's pending-activity view; the workflow counts finished shards.
  const heartbeat = new ProgressReporter();
  const context = Context.current();
  const predictor = await openPredictor(retriever, { signal: context.cancellationSignal, embeddingCacheDir: path.join(path.dirname(input.runDir), 'embeddings') });
  let done = 0;
  let rows: (EvaluationPrediction & InstanceMetrics)[];
  try {
    rows = await mapWithConcurrency(shard, predictor.concurrency, async (instance: EvaluationInstance) => {
      const t0 = performance.now();
      const prediction = await predictor.predict(instance);
      prediction.ms = performance.now() - t0;
      const metrics = scoreInstance(prediction, instance.truth, input.evaluation.fileTarget);
      done++;
      heartbeat.report({ stage: 'predict', done, total: shard.length, unit: `instances of ${plan.name} shard ${input.shardIndex + 1}/${input.shardCount}`, counts: {} });
      return { ...prediction, ...metrics };
    });
  } finally {
    heartbeat.close();
    await predictor.close();
  }
  const ref = await writeParquetArtifact({
    path: shardPath,
    schemaName: EVALUATION_SHARD_SCHEMA_NAME,
    schemaVersion: EVALUATION_SCHEMA_VERSION,
    arrowSchema: evaluationShardArrowSchema,
    rows,
    inputs,
    configHash,
  });
  const failed = rows.filter((r) => r.failed).length;
  log.info('evaluation shard: done', { retriever: plan.name, shard: input.shardIndex, instances: rows.length, failed });
  return { retriever: plan.name, shardIndex: input.shardIndex, shard: ref, cached: false, instances: rows.length, failed, ms: Date.now() - started };
}
