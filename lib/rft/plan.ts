import { findCachedArtifact, hashConfig, readParquetObjects, writeParquetArtifact } from '../artifacts';
import type { ArtifactRef } from '../../schemas/artifact-ref';
import {
  ENVIRONMENT_SAMPLES_SCHEMA_NAME,
  ENVIRONMENT_SAMPLES_SCHEMA_VERSION,
  environmentSamplesArrowSchema,
} from '../../schemas/environment';
import type { RftConfig, RftPlan } from '../../schemas/rft';
import type { ResolvedTrainingConfig } from '../../schemas/training/config';
import { keepThresholds } from './keep';
import { rftLayout, rftLimits, rftShardCount } from './sample-shard';

/** The RFT instances are not all samples of the run (a wrong id in the config): refused by name. */
export class RftPlanError extends Error {
  override readonly name = 'RftPlanError';
}

/**
 * Splits the environment's samples into the RFT instances (what the teacher is sampled on) and the rest (what RL
 * trains on: CodeScout §4.1 trains RL on instances "not seen during RFT"), both as Parquet artifacts (a cache hit
 * when samples and instances are the same), and hashes everything a rollout depends on but the teacher.
 */
export async function planRft(input: {
  runDir: string;
  samples: ArtifactRef;
  rft: RftConfig;
  training: ResolvedTrainingConfig;
}): Promise<RftPlan> {
  const rows = (await readParquetObjects(input.samples.uri)) as (Record<string, unknown> & { instanceId: string })[];
  const known = new Set(rows.map((r) => r.instanceId));
  const unknown = input.rft.instances.filter((id) => !known.has(id));
  if (unknown.length > 0)
    throw new RftPlanError(
      `rft.instances: ${unknown.slice(0, 10).join(', ')}${unknown.length > 10 ? ` (and ${unknown.length - 10} more)` : ''} are not samples of this run (${input.samples.uri})`,
    );
  const chosen = new Set(input.rft.instances);
  if (rows.every((r) => chosen.has(r.instanceId)))
    throw new RftPlanError('rft.instances takes every sample of the run: nothing is left for RL training');
  const layout = rftLayout(input.runDir);
  const instances = [...input.rft.instances].sort();
  const write = async (file: string, part: 'training' | 'rft') => {
    const expectation = {
      schemaName: ENVIRONMENT_SAMPLES_SCHEMA_NAME,
      schemaVersion: ENVIRONMENT_SAMPLES_SCHEMA_VERSION,
      inputs: [input.samples],
      configHash: hashConfig({ stage: `rft-split-${part}`, instances }),
    };
    const partRows = rows.filter((r) => chosen.has(r.instanceId) === (part === 'rft'));
    return (
      (await findCachedArtifact(file, expectation)) ??
      writeParquetArtifact({ path: file, arrowSchema: environmentSamplesArrowSchema, rows: partRows, ...expectation })
    );
  };
  const trainingSamples = await write(layout.trainingSamples, 'training');
  const rftSamples = await write(layout.rftSamples, 'rft');
  const planHash = hashConfig({
    stage: 'rft-sample',
    samples: input.samples.sha256,
    instances,
    recipe: input.training.recipe,
    limits: rftLimits(input.rft, input.training),
    codescoutTurnBonus: input.training.codescoutTurnBonus,
    temperature: input.rft.temperature ?? null,
    topP: input.rft.topP ?? null,
    keep: keepThresholds(input.rft.keep),
    shardSize: input.rft.shardSize,
  });
  return {
    instances: instances.length,
    shardCount: rftShardCount(instances.length, input.rft.shardSize),
    planHash,
    trainingSamples,
    rftSamples,
  };
}

/** The instance ids of the RFT samples artifact, sorted (the order shards are cut in). */
export async function planRftInstanceIds(uri: string): Promise<string[]> {
  return (await readParquetObjects(uri)).map((row) => String(row.instanceId)).sort();
}
