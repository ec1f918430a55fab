import type { StageProgress } from '../../../schemas/progress';
import type { SandboxIsolation } from '../../../schemas/sandbox';
import type { EvaluationInstance } from '../../evaluation/instances';
import type { EvaluationPrediction, RetrieverConfig } from '../../../schemas/evaluation';

/**
 * A failure that concerns every instance of a shard: `failureType` and `nonRetryable` say how the activity
 * fails it (the types of temporal.config.ts `retryPolicy.nonRetryableErrorTypes`, as LlmError's).
 */
export class PredictorFailure extends Error {
  constructor(
    readonly failureType: string,
    readonly nonRetryable: boolean,
    message: string,
  ) {
    super(message);
    this.name = 'PredictorFailure';
  }
}

export interface Predictor {
  /** Instances of a shard predicted at once. */
  readonly concurrency: number;
  predict(instance: EvaluationInstance): Promise<EvaluationPrediction>;
  /**
   * The instances `predict` will be asked about, in that order (a shard's): a predictor may prepare the next
   * while answering the current one. Optional; called once, before the first `predict`.
   */
  upcoming?(instances: readonly EvaluationInstance[]): void;
  close(): Promise<void>;
}

/** Which lists a retriever produces; the others stay null so their levels are not scored. */
export interface OutputShape {
  ranked: boolean;
  lineRanges: boolean;
  modules: boolean;
  functions: boolean;
}

export interface PredictorContext {
  signal: AbortSignal;
  /** Shared cache folder for dense embeddings (`<dataDir>/embeddings`). */
  embeddingCacheDir: string;
  /** Shared cache folder of BM25 term counts by blob id (default `<dataDir>/bm25-terms`, beside the embeddings). */
  termCacheDir?: string;
  /** Long work inside a prediction (embedding a repository's new blobs) reports here: the activity's heartbeats. */
  onProgress?: (progress: StageProgress) => void;
  /** The environment the worker read at start (activities/kit/deps.ts): an agent retriever's API key is `env[apiKeyEnv]`. */
  env: Readonly<Record<string, string | undefined>>;
  /** How the agent retriever's tools are isolated (the run config's `sandbox.isolation`; default namespace). */
  isolation?: SandboxIsolation;
}

export function emptyPrediction(instance: EvaluationInstance, retriever: RetrieverConfig, shape: OutputShape): EvaluationPrediction {
  return {
    instanceId: instance.instanceId,
    retriever: retriever.name,
    kind: retriever.kind,
    files: [],
    ranked: shape.ranked ? [] : null,
    lineRanges: shape.lineRanges ? [] : null,
    modules: shape.modules ? [] : null,
    functions: shape.functions ? [] : null,
    turns: null,
    toolCalls: null,
    promptTokens: null,
    completionTokens: null,
    answerValid: null,
    endReason: null,
    error: null,
    ms: 0,
    ...servedColumns(retriever),
  };
}

export function failedPrediction(
  instance: EvaluationInstance,
  retriever: RetrieverConfig,
  shape: OutputShape,
  error: string,
): EvaluationPrediction {
  return { ...emptyPrediction(instance, retriever, shape), error };
}

export function noWorktree(instance: EvaluationInstance): string {
  return `no worktree for ${instance.repo}@${instance.baseCommit.slice(0, 12)}: the environment stage could not materialize it`;
}

/** The served checkpoint's columns of a prediction: set for a trained policy, null for every other retriever. */
export function servedColumns(retriever: RetrieverConfig) {
  const served = retriever.kind === 'agent' ? retriever.served : undefined;
  return {
    servedModel: served?.model ?? null,
    baseModel: served?.baseModel ?? null,
    checkpointStep: served?.step ?? null,
    adapterSha256: served?.adapterSha256 ?? null,
  };
}
