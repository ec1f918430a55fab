import path from 'node:path';
import { episodeToPredictionRow, runAgentRetriever } from '../agent';
import type { EvaluationInstance } from '../evaluation/instances';
import { LlmError, LlmRequestRejectedError } from '../llm/errors';
import { locationsToSets } from '../metrics/levels';
import { RANKED_DEPTH } from '../reports';
import type { Prediction } from '../../schemas/predictions';
import type { EvaluationPrediction, RetrieverConfig } from '../../schemas/evaluation';
import { collectWorktreeFiles, indexWorktree, type WorktreeIndex } from './bm25/worktree';
import { retrieveTopK } from './bm25/retriever';
import { buildDenseIndex, indexWorktreeDense, loadEmbeddingModel, releaseEmbeddingModel, retrieveDense, type DenseWorktreeIndex, type EmbeddingModel } from './dense';
import { cutPrediction, readPredictionsFile } from './predictions-file';

/**
 * One predictor per retriever kind, opened once per shard: BM25 (CodeGrep App. E), the dense embedding
 * retriever, the agent on an OpenAI-compatible endpoint, and an outside system's predictions file. A failure
 * that concerns one instance (no worktree, a request the endpoint rejects, no line in the predictions file)
 * becomes that instance's failed row; one that concerns every instance (a refused API key, a model the
 * endpoint does not serve) fails the shard at once without retry; an endpoint that stays unreachable fails
 * the shard so Temporal retries it later.
 */

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
interface OutputShape {
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
}

function emptyPrediction(instance: EvaluationInstance, retriever: RetrieverConfig, shape: OutputShape): EvaluationPrediction {
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
  };
}

function failedPrediction(instance: EvaluationInstance, retriever: RetrieverConfig, shape: OutputShape, error: string): EvaluationPrediction {
  return { ...emptyPrediction(instance, retriever, shape), error };
}

function noWorktree(instance: EvaluationInstance): string {
  return `no worktree for ${instance.repo}@${instance.baseCommit.slice(0, 12)}: the environment stage could not materialize it`;
}

/** Keeps the index of the last worktree: instances come ordered by commit, so each index is built once. */
function lastIndexCache<T>(build: (root: string, commit: string) => Promise<T>): (root: string, commit: string) => Promise<T> {
  let last: { root: string; index: Promise<T> } | null = null;
  return (root, commit) => {
    if (last?.root !== root) last = { root, index: build(root, commit) };
    return last.index;
  };
}

function bm25Predictor(retriever: Extract<RetrieverConfig, { kind: 'bm25' }>): Predictor {
  const shape: OutputShape = { ranked: true, lineRanges: false, modules: false, functions: false };
  const index = lastIndexCache((root): Promise<WorktreeIndex> => indexWorktree(root, { includeTests: !retriever.excludeTests }));
  return {
    concurrency: 1,
    async predict(instance) {
      if (!instance.worktreePath) return failedPrediction(instance, retriever, shape, noWorktree(instance));
      const ranked = retrieveTopK(await index(instance.worktreePath, instance.baseCommit), instance.problemStatement, Math.max(retriever.k, RANKED_DEPTH)).map((r) => r.path);
      return { ...emptyPrediction(instance, retriever, shape), ranked, files: ranked.slice(0, retriever.k) };
    },
    close: async () => undefined,
  };
}

async function densePredictor(retriever: Extract<RetrieverConfig, { kind: 'dense' }>, context: PredictorContext): Promise<Predictor> {
  const shape: OutputShape = { ranked: true, lineRanges: false, modules: false, functions: false };
  let model: EmbeddingModel;
  try {
    model = await loadEmbeddingModel(retriever.modelDir);
  } catch (error) {
    throw new PredictorFailure('ConfigError', true, `dense retriever "${retriever.name}": ${(error as Error).message}`);
  }
  const scan = { includeTests: !retriever.excludeTests };
  const denseOptions = { cacheDir: context.embeddingCacheDir, maxChunksPerFile: retriever.maxChunksPerFile };
  const index = lastIndexCache((root, commit): Promise<DenseWorktreeIndex> => indexWorktreeDense(root, commit, model, { ...scan, ...denseOptions }));
  // With bm25Candidates the corpus is the instance's BM25 top files (same walker, same App. E index).
  const bm25Index = lastIndexCache((root): Promise<WorktreeIndex> => indexWorktree(root, scan));
  const candidateIndex = async (instance: EvaluationInstance, root: string, top: number) => {
    const bm25 = await bm25Index(root, instance.baseCommit);
    const candidates = new Set(retrieveTopK(bm25, instance.problemStatement, top).map((r) => r.path));
    const { files } = await collectWorktreeFiles(root, scan);
    return buildDenseIndex(files.filter((f) => candidates.has(f.path)), instance.baseCommit, model, { ...denseOptions, subsetOfCommit: true });
  };
  return {
    concurrency: 1,
    async predict(instance) {
      if (!instance.worktreePath) return failedPrediction(instance, retriever, shape, noWorktree(instance));
      const corpus = retriever.bm25Candidates
        ? await candidateIndex(instance, instance.worktreePath, retriever.bm25Candidates)
        : await index(instance.worktreePath, instance.baseCommit);
      const hits = await retrieveDense(corpus, instance.problemStatement, Math.max(retriever.k, RANKED_DEPTH));
      const ranked = hits.map((h) => h.path);
      return { ...emptyPrediction(instance, retriever, shape), ranked, files: ranked.slice(0, retriever.k) };
    },
    close: () => releaseEmbeddingModel(model),
  };
}

function agentPredictor(retriever: Extract<RetrieverConfig, { kind: 'agent' }>, context: PredictorContext): Predictor {
  const codescout = retriever.answerFormat === 'codescout';
  const shape: OutputShape = { ranked: false, lineRanges: !codescout, modules: codescout, functions: codescout };
  const env = context.env ?? process.env;
  const apiKey = retriever.apiKeyEnv ? env[retriever.apiKeyEnv]?.trim() || undefined : undefined;
  const endpoint = { baseUrl: retriever.baseUrl, model: retriever.model, ...(apiKey ? { apiKey } : {}) };
  return {
    concurrency: retriever.concurrency,
    async predict(instance) {
      if (!instance.worktreePath) return failedPrediction(instance, retriever, shape, noWorktree(instance));
      let result;
      try {
        result = await runAgentRetriever({
          endpoint,
          instance: { instanceId: instance.instanceId, problemStatement: instance.problemStatement, repo: instance.repo },
          worktreeRoot: instance.worktreePath,
          answerFormat: retriever.answerFormat,
          ...(retriever.limits ? { limits: retriever.limits } : {}),
          ...(retriever.temperature === undefined ? {} : { temperature: retriever.temperature }),
          ...(retriever.topP === undefined ? {} : { topP: retriever.topP }),
          retry: { timeoutMs: retriever.timeoutMs },
          signal: context.signal,
        });
      } catch (error) {
        if (context.signal.aborted) throw error;
        if (error instanceof LlmRequestRejectedError) return failedPrediction(instance, retriever, shape, error.message);
        if (error instanceof LlmError) {
          throw new PredictorFailure(error.failureType, error.nonRetryable, `agent retriever "${retriever.name}" on instance ${instance.instanceId}: ${error.message}`);
        }
        return failedPrediction(instance, retriever, shape, (error as Error).message);
      }
      const row = episodeToPredictionRow(result, retriever.name);
      const usage = { turns: row.turns, toolCalls: row.toolCalls, promptTokens: row.promptTokens, completionTokens: row.completionTokens, answerValid: row.answerValid, endReason: row.endReason };
      if (codescout) {
        const sets = locationsToSets(row.locations);
        return { ...emptyPrediction(instance, retriever, shape), ...usage, files: [...sets.files], modules: [...sets.modules], functions: [...sets.functions] };
      }
      return { ...emptyPrediction(instance, retriever, shape), ...usage, files: row.files, lineRanges: row.lineRanges };
    },
    close: async () => undefined,
  };
}

async function predictionsFilePredictor(retriever: Extract<RetrieverConfig, { kind: 'predictions' }>): Promise<Predictor> {
  const file = await readPredictionsFile(retriever.path);
  const byId = new Map<string, Prediction>(file.predictions.map((p) => [p.instanceId, p]));
  // A system that names modules (or functions) for some instances predicts that level: where a line has none,
  // it predicted none there.
  const shape: OutputShape = {
    ranked: true,
    lineRanges: false,
    modules: file.predictions.some((p) => p.modules !== undefined),
    functions: file.predictions.some((p) => p.functions !== undefined),
  };
  const name = path.basename(retriever.path);
  return {
    concurrency: 1,
    async predict(instance) {
      const found = byId.get(instance.instanceId);
      if (!found) return failedPrediction(instance, retriever, shape, `no line for this instance in ${name}`);
      const cut = retriever.k === undefined ? found : cutPrediction(found, retriever.k);
      return {
        ...emptyPrediction(instance, retriever, shape),
        ranked: found.files,
        files: cut.files,
        modules: shape.modules ? (cut.modules ?? []) : null,
        functions: shape.functions ? (cut.functions ?? []) : null,
      };
    },
    close: async () => undefined,
  };
}

export async function openPredictor(retriever: RetrieverConfig, context: PredictorContext): Promise<Predictor> {
  switch (retriever.kind) {
    case 'bm25':
      return bm25Predictor(retriever);
    case 'dense':
      return densePredictor(retriever, context);
    case 'agent':
      return agentPredictor(retriever, context);
    case 'predictions':
      return predictionsFilePredictor(retriever);
  }
}
