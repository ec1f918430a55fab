import type { EvaluationInstance } from '../../evaluation/instances';
import { RANKED_DEPTH } from '../../reports';
import type { RetrieverConfig } from '../../../schemas/evaluation';
import { retrieveTopK } from '../bm25/retriever';
import { collectWorktreeFiles, indexWorktree, type WorktreeIndex } from '../bm25/worktree';
import {
  buildDenseIndex,
  indexWorktreeDense,
  loadEmbeddingModel,
  releaseEmbeddingModel,
  retrieveDense,
  type DenseWorktreeIndex,
  type EmbeddingModel,
} from '../dense';
import {
  emptyPrediction,
  failedPrediction,
  lastIndexCache,
  noWorktree,
  PredictorFailure,
  type OutputShape,
  type Predictor,
  type PredictorContext,
} from './predictor';

/** The dense embedding retriever; a model folder that cannot be loaded fails the shard (ConfigError). */
export async function densePredictor(
  retriever: Extract<RetrieverConfig, { kind: 'dense' }>,
  context: PredictorContext,
): Promise<Predictor> {
  const shape: OutputShape = { ranked: true, lineRanges: false, modules: false, functions: false };
  let model: EmbeddingModel;
  try {
    model = await loadEmbeddingModel(retriever.modelDir);
  } catch (error) {
    throw new PredictorFailure('ConfigError', true, `dense retriever "${retriever.name}": ${(error as Error).message}`);
  }
  const scan = { includeTests: !retriever.excludeTests };
  const denseOptions = { cacheDir: context.embeddingCacheDir, maxChunksPerFile: retriever.maxChunksPerFile };
  const index = lastIndexCache((root, commit): Promise<DenseWorktreeIndex> =>
    indexWorktreeDense(root, commit, model, { ...scan, ...denseOptions }),
  );
  // With bm25Candidates the corpus is the instance's BM25 top files (same walker, same App. E index).
  const bm25Index = lastIndexCache((root): Promise<WorktreeIndex> => indexWorktree(root, scan));
  const candidateIndex = async (instance: EvaluationInstance, root: string, top: number) => {
    const bm25 = await bm25Index(root, instance.baseCommit);
    const candidates = new Set(retrieveTopK(bm25, instance.problemStatement, top).map((r) => r.path));
    const { files } = await collectWorktreeFiles(root, scan);
    return buildDenseIndex(
      files.filter((f) => candidates.has(f.path)),
      instance.baseCommit,
      model,
      { ...denseOptions, subsetOfCommit: true },
    );
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
