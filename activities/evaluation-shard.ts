import path from 'node:path';
import { Context, log } from '@temporalio/activity';
import { findCachedArtifact, hashConfig, readRows, writeParquetArtifact } from '../lib/artifacts';
import { loadEvaluationInstances, shardFileName, shardOf } from '../lib/evaluation/instances';
import { predictAndScore, type ScoredPrediction } from '../lib/evaluation/predict-shard';
import { openPredictor } from '../lib/retrievers/predictors';
import { holdWorktrees } from '../lib/worktrees/holds';
import {
  EVALUATION_SCHEMA_VERSION,
  EVALUATION_SHARD_SCHEMA_NAME,
  EvaluateShardInputSchema,
  evaluationShardArrowSchema,
  type EvaluateShardInput,
  type EvaluateShardOutput,
} from '../schemas/evaluation';
import type { RetrieverConfig } from '../schemas/evaluation/config';
import { invalidInput, ProgressReporter, rethrowPredictorFailure, type ActivityDeps } from './kit';

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
export function makeEvaluateShard(deps: Pick<ActivityDeps, 'env'>): (input: EvaluateShardInput) => Promise<EvaluateShardOutput> {
  return (input) => evaluateShard(deps, input);
}

/** The input as parsed (defaults filled in). */
type ShardInput = ReturnType<typeof EvaluateShardInputSchema.parse>;

/** `evaluateShard` with the worker's deps: an agent retriever's API key is read from `deps.env`. */
async function evaluateShard(deps: Pick<ActivityDeps, 'env'>, rawInput: EvaluateShardInput): Promise<EvaluateShardOutput> {
  const input = EvaluateShardInputSchema.parse(rawInput);
  const started = Date.now();
  const plan = input.retriever;
  const retriever = input.evaluation.retrievers.find((r) => r.name === plan.name);
  if (!retriever) throw invalidInput(`retriever "${plan.name}" is not in evaluation.retrievers`);
  const shardPath = path.join(plan.shardDir, shardFileName(input.shardIndex, input.shardCount));
  const inputs = [input.samples, ...plan.inputs];
  const configHash = hashConfig({
    stage: 'evaluation-shard',
    planHash: plan.planHash,
    shardIndex: input.shardIndex,
    shardCount: input.shardCount,
  });
  const expectation = { schemaName: EVALUATION_SHARD_SCHEMA_NAME, schemaVersion: EVALUATION_SCHEMA_VERSION, inputs, configHash };
  const outcome = { retriever: plan.name, shardIndex: input.shardIndex };

  const cached = await findCachedArtifact(shardPath, expectation);
  if (cached) {
    log.info('evaluation shard: cache hit', { retriever: plan.name, shard: input.shardIndex });
    return {
      ...outcome,
      shard: cached,
      cached: true,
      instances: cached.rows,
      failed: await countFailed(cached.uri),
      ms: Date.now() - started,
    };
  }

  const rows = await predictShard(deps, input, retriever);
  const ref = await writeParquetArtifact({ ...expectation, path: shardPath, arrowSchema: evaluationShardArrowSchema, rows });
  const failed = rows.filter((r) => r.failed).length;
  log.info('evaluation shard: done', { retriever: plan.name, shard: input.shardIndex, instances: rows.length, failed });
  return { ...outcome, shard: ref, cached: false, instances: rows.length, failed, ms: Date.now() - started };
}

/**
 * Predicts and scores every instance of the shard with the retriever's predictor, heartbeating the count done;
 * the predictor is closed and the shard's worktrees released whatever happens.
 */
async function predictShard(deps: Pick<ActivityDeps, 'env'>, input: ShardInput, retriever: RetrieverConfig): Promise<ScoredPrediction[]> {
  const loaded = await loadEvaluationInstances(input.samples.uri, input.evaluation.instances);
  const shard = shardOf(loaded.instances, input.evaluation.shardSize, input.shardIndex);
  // Heartbeats carry the shard's progress to the CLI and the UI's pending-activity view; the workflow counts finished shards.
  const heartbeat = new ProgressReporter();
  const embeddingCacheDir = path.join(path.dirname(input.runDir), 'embeddings');
  const predictor = await openPredictor(retriever, {
    signal: Context.current().cancellationSignal,
    embeddingCacheDir,
    env: deps.env,
    onProgress: (progress) => heartbeat.report(progress),
    ...(input.evaluation.sandbox ? { isolation: input.evaluation.sandbox.isolation } : {}),
  }).catch((error: unknown) => {
    heartbeat.close();
    return rethrowPredictorFailure(error);
  });
  const unit = `instances of ${retriever.name} shard ${input.shardIndex + 1}/${input.shardCount}`;
  // The shard's worktrees are in use while it runs: no disk budget prunes them (lib/worktrees/holds.ts).
  const hold = await holdWorktrees(shard.flatMap((i) => (i.worktreePath ? [i.worktreePath] : [])));
  try {
    return await predictAndScore(shard, predictor, input.evaluation.fileTarget, (done) =>
      heartbeat.report({ stage: 'predict', done, total: shard.length, unit, counts: {} }),
    );
  } catch (error) {
    return rethrowPredictorFailure(error);
  } finally {
    heartbeat.close();
    await predictor.close();
    await hold.release();
  }
}
