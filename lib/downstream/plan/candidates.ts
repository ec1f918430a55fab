import { existsSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { findCachedArtifact, hashConfig, sourceRef, writeBytesAtomically, writeParquetArtifact } from '../../artifacts';
import { mapWithConcurrency } from '../../evaluation/predict-shard';
import type { EvaluationInstance } from '../../evaluation/instances';
import type { InstanceTruth } from '../../reports';
import { openPredictor, type Predictor } from '../../retrievers/predictors';
import type { ArtifactRef } from '../../../schemas/artifact-ref';
import type { DownstreamInstance } from '../../../schemas/downstream';
import type { RepoSource } from '../../../schemas/worktrees';
import type { SandboxIsolation } from '../../../schemas/sandbox';
import {
  EVALUATION_PREDICTIONS_SCHEMA_NAME,
  EVALUATION_SCHEMA_VERSION,
  EvaluationPredictionSchema,
  evaluationPredictionsArrowSchema,
  type AgentRetrieverConfig,
  type EvaluationPrediction,
} from '../../../schemas/evaluation';
import { downstreamPaths, fileSafe } from '../layout';
import { readDownstreamInstances } from './plan-instances';
import { gitRunWorktrees } from '../runs/run-worktree';

/**
 * The files a served trained policy finds for each downstream instance (a configuration with source `agent`;
 * README "Serving and evaluating the trained policy"): the evaluation's agent retriever, pointed at the policy
 * server, runs once per instance in a throwaway checkout of its base commit, and the rows are written as an
 * evaluation-predictions Parquet (with the served checkpoint's columns) that the downstream plan reads like
 * any predictions file. Each finished instance is kept as a small JSON record, so a killed or retried attempt
 * asks the policy only about the instances still missing; the Parquet of the same checkpoint and instances is
 * a cache hit.
 */

export interface RetrieveCandidatesOptions {
  runDir: string;
  /** The downstream configuration the files are for (names the output folder). */
  configuration: string;
  /** The agent retriever with its `served` checkpoint, endpoint, answer format and turn limit filled in. */
  retriever: AgentRetrieverConfig;
  instancesFile: string;
  /** `downstream.instances`: only these ids (default: every valid instance). */
  instances?: readonly string[];
  checkouts: { repoSource: RepoSource; cacheDir: string };
  isolation?: SandboxIsolation;
  signal: AbortSignal;
  /** Instances done so far (records found included). */
  onProgress?: (done: number, total: number) => void;
  /** The worker's environment (activities/kit/deps.ts): the served policy's API key, when its retriever names one. */
  env: Readonly<Record<string, string | undefined>>;
}

export interface RetrievedCandidates {
  predictions: ArtifactRef;
  instances: number;
  /** Instances whose episode failed (an `error` row: nothing is injected for them). */
  failed: number;
  /** Instances answered before this call (records of an earlier attempt), or every one when the Parquet was cached. */
  reused: number;
}

/** Downstream instances carry no retrieval ground truth; the predictor never reads it, and nothing here is scored. */
const UNSCORED: InstanceTruth = { goldFiles: [], targetFiles: [], lineRanges: [], modules: [], functions: [] };

/** `downstream/candidates/<configuration>/<key>/`: one checkpoint's answers for one set of instances. */
export function candidatesDir(runDir: string, configuration: string, key: string): string {
  return path.join(downstreamPaths(runDir).root, 'candidates', fileSafe(configuration), key);
}

function readRecord(file: string): EvaluationPrediction | null {
  if (!existsSync(file)) return null;
  try {
    const parsed = EvaluationPredictionSchema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null; // a torn or edited record: asked again
  }
}

export async function retrieveCandidates(options: RetrieveCandidatesOptions): Promise<RetrievedCandidates> {
  const { retriever } = options;
  const served = retriever.served;
  if (!served || !retriever.baseUrl || !retriever.model)
    throw new Error(`downstream configuration ${options.configuration}: the agent retriever has no served policy to ask`);
  const read = await readDownstreamInstances(options.instancesFile, options.instances);
  const instances = read.instances;
  const instancesRef = await sourceRef(options.instancesFile);
  const configHash = candidatesConfigHash(retriever, served, instances);
  const dir = candidatesDir(options.runDir, options.configuration, configHash.slice(0, 16));
  const parquet = path.join(dir, 'predictions.parquet');
  const expectation = {
    schemaName: EVALUATION_PREDICTIONS_SCHEMA_NAME,
    schemaVersion: EVALUATION_SCHEMA_VERSION,
    inputs: [instancesRef],
    configHash,
  };
  const cached = await findCachedArtifact(parquet, expectation);
  if (cached) return { predictions: cached, instances: cached.rows, failed: 0, reused: cached.rows };

  const { rows, reused } = await askPolicy(options, instances, dir);
  const predictions = await writeParquetArtifact({
    path: parquet,
    arrowSchema: evaluationPredictionsArrowSchema,
    rows: rows as unknown as Record<string, unknown>[],
    ...expectation,
  });
  return { predictions, instances: rows.length, failed: rows.filter((r) => r.error !== null).length, reused };
}

/** What the answers depend on: the checkpoint (adapter bytes), how it is asked, and which instances. */
function candidatesConfigHash(
  retriever: AgentRetrieverConfig,
  served: NonNullable<AgentRetrieverConfig['served']>,
  instances: readonly DownstreamInstance[],
): string {
  return hashConfig({
    stage: 'downstream-candidates',
    adapterSha256: served.adapterSha256,
    model: served.model,
    answerFormat: retriever.answerFormat ?? null,
    limits: retriever.limits ?? null,
    temperature: retriever.temperature ?? null,
    topP: retriever.topP ?? null,
    instances: instances.map((i) => i.instance_id),
  });
}

/** Every instance's row: its record when an earlier attempt kept one, else the policy's answer, kept as a record. */
async function askPolicy(
  options: RetrieveCandidatesOptions,
  instances: readonly DownstreamInstance[],
  dir: string,
): Promise<{ rows: EvaluationPrediction[]; reused: number }> {
  const recordOf = (instanceId: string) => path.join(dir, 'instances', `${fileSafe(instanceId)}.json`);
  const checkoutsDir = path.join(dir, 'checkouts');
  const worktrees = gitRunWorktrees({ cacheDir: options.checkouts.cacheDir, runDir: checkoutsDir, source: options.checkouts.repoSource });
  const predictor = await openPredictor(options.retriever, {
    signal: options.signal,
    embeddingCacheDir: path.join(dir, 'unused-embeddings'),
    ...(options.isolation ? { isolation: options.isolation } : {}),
    env: options.env,
  });
  let done = 0;
  let reused = 0;
  try {
    const rows = await mapWithConcurrency(instances, predictor.concurrency, async (instance) => {
      const record = recordOf(instance.instance_id);
      let row = readRecord(record);
      if (row) reused += 1;
      else {
        const checkout = await worktrees.create(instance.repo, instance.base_commit, `${options.configuration}-${instance.instance_id}`);
        try {
          row = await predictInCheckout(predictor, instance, checkout.path);
        } finally {
          await checkout.dispose();
        }
        await writeBytesAtomically(record, `${JSON.stringify(row)}\n`);
      }
      options.onProgress?.(++done, instances.length);
      return row;
    });
    return { rows, reused };
  } finally {
    await predictor.close();
    await rm(checkoutsDir, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** The policy's answer for one instance, asked in a checkout of its base commit, with the time it took. */
async function predictInCheckout(predictor: Predictor, instance: DownstreamInstance, worktreePath: string): Promise<EvaluationPrediction> {
  const asked: EvaluationInstance = {
    instanceId: instance.instance_id,
    repo: instance.repo,
    baseCommit: instance.base_commit,
    problemStatement: instance.problem_statement,
    worktreePath,
    gitDir: null,
    truth: UNSCORED,
  };
  const t0 = performance.now();
  const row = await predictor.predict(asked);
  row.ms = performance.now() - t0;
  return row;
}
