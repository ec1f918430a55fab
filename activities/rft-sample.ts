import path from 'node:path';
import { Context, log } from '@temporalio/activity';
import { findCachedArtifact, hashConfig, writeParquetArtifact } from '../lib/artifacts';
import { LlmError } from '../lib/llm/errors';
import * as rft from '../lib/rft';
import {
  RFT_SCHEMA_VERSION,
  RFT_SHARD_SCHEMA_NAME,
  SampleRftShardInputSchema,
  rftTrajectoryColumns,
  type SampleRftShardInput,
  type SampleRftShardOutput,
} from '../schemas/rft';
import type { ArtifactRef } from '../schemas/artifact-ref';
import { nonRetryable, ProgressReporter, type ActivityDeps } from './kit';

/**
 * One shard of RFT's teacher sampling (lib/rft sampleRftShard): each finished rollout is in the shard's log as
 * soon as it completes, so a retry after a killed worker asks the teacher only for the rest; the finished
 * shard is a Parquet artifact, a cache hit for any later run of the same plan and teacher.
 */
export function makeSampleRftShard(deps: Pick<ActivityDeps, 'env'>): (input: SampleRftShardInput) => Promise<SampleRftShardOutput> {
  return (input) => sampleRftShard(deps, input);
}

/** `sampleRftShard` with the worker's deps: the teacher's API key is `deps.env[teacher.apiKeyEnv]`. */
async function sampleRftShard(deps: Pick<ActivityDeps, 'env'>, rawInput: SampleRftShardInput): Promise<SampleRftShardOutput> {
  const input = SampleRftShardInputSchema.parse(rawInput);
  const { plan, teacher } = input;
  const shardDir = path.join(
    rft.rftLayout(input.runDir).shards,
    hashConfig({ plan: plan.planHash, teacher: teacher.identity }).slice(0, 16),
  );
  const name = `shard-${String(input.shardIndex).padStart(4, '0')}-of-${String(plan.shardCount).padStart(4, '0')}`;
  const shardPath = path.join(shardDir, `${name}.parquet`);
  const expectation = {
    schemaName: RFT_SHARD_SCHEMA_NAME,
    schemaVersion: RFT_SCHEMA_VERSION,
    inputs: [input.rftSamples] as ArtifactRef[],
    configHash: hashConfig({ stage: 'rft-shard', plan: plan.planHash, teacher: teacher.identity, shard: input.shardIndex }),
  };
  const cached = await findCachedArtifact(shardPath, expectation);
  if (cached) {
    const rows = await rft.readRftRows(cached.uri);
    return { shard: cached, cached: true, sampled: rows.length, kept: rows.filter((r) => r.kept).length, resumed: rows.length };
  }
  const ids = await rft.planRftInstanceIds(input.rftSamples.uri);
  const instanceIds = rft.rftShardInstances(ids, input.rft.shardSize, input.shardIndex);
  const apiKey = teacher.apiKeyEnv ? deps.env[teacher.apiKeyEnv]?.trim() || undefined : undefined;
  const heartbeat = new ProgressReporter();
  const unit = `rollouts of RFT shard ${input.shardIndex + 1}/${plan.shardCount}`;
  let sampled: Awaited<ReturnType<typeof rft.sampleRftShard>>;
  try {
    sampled = await rft.sampleRftShard({
      logDir: path.join(shardDir, 'log', name),
      shardName: 'rollouts',
      samplesUri: input.rftSamples.uri,
      instanceIds,
      options: {
        endpoint: { baseUrl: teacher.baseUrl, model: teacher.model, ...(apiKey ? { apiKey } : {}) },
        teacher: teacher.label,
        rft: input.rft,
        training: input.training,
        signal: Context.current().cancellationSignal,
      },
      onRollout: (done) => heartbeat.report({ stage: 'sample', done, total: instanceIds.length, unit, counts: {} }),
    });
  } catch (error) {
    // A refused key or an unknown model fails without retry; an unreachable teacher is retried by Temporal.
    if (error instanceof LlmError && error.nonRetryable)
      throw nonRetryable(error.failureType, `RFT teacher ${teacher.label}: ${error.message}`);
    throw error;
  } finally {
    heartbeat.close();
  }
  const shard = await writeParquetArtifact({
    path: shardPath,
    arrowSchema: rftTrajectoryColumns.arrowSchema(),
    rows: sampled.rows,
    ...expectation,
  });
  const kept = sampled.rows.filter((r) => r.kept).length;
  log.info('rft: shard sampled', { shard: input.shardIndex, rollouts: sampled.rows.length, kept, resumed: sampled.resumed });
  return { shard, cached: false, sampled: sampled.rows.length, kept, resumed: sampled.resumed };
}
