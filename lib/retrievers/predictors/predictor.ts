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
  env?: Record<string, string | undefined>;
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

/** Keeps the index of the last worktree: instances come ordered by commit, so each index is built once. */
export function lastIndexCache<T>(build: (root: string, commit: string) => Promise<T>): (root: string, commit: string) => Promise<T> {
  let last: { root: string; index: Promise<T> } | null = null;
  return (root, commit) => {
    if (last?.root !== root) last = { root, index: build(root, commit) };
    return last.index;
  };
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
