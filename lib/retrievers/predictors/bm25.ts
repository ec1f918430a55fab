import { RANKED_DEPTH } from '../../reports';
import type { RetrieverConfig } from '../../../schemas/evaluation';
import { retrieveTopK } from '../bm25/retriever';
import { indexWorktree, type WorktreeIndex } from '../bm25/worktree';
import { emptyPrediction, failedPrediction, lastIndexCache, noWorktree, type OutputShape, type Predictor } from './predictor';

/** BM25 exactly as CodeGrep App. E over the instance's worktree; `ranked` keeps the depth Acc@k reads. */
export function bm25Predictor(retriever: Extract<RetrieverConfig, { kind: 'bm25' }>): Predictor {
  const shape: OutputShape = { ranked: true, lineRanges: false, modules: false, functions: false };
  const index = lastIndexCache((root): Promise<WorktreeIndex> => indexWorktree(root, { includeTests: !retriever.excludeTests }));
  return {
    concurrency: 1,
    async predict(instance) {
      if (!instance.worktreePath) return failedPrediction(instance, retriever, shape, noWorktree(instance));
      const ranked = retrieveTopK(
        await index(instance.worktreePath, instance.baseCommit),
        instance.problemStatement,
        Math.max(retriever.k, RANKED_DEPTH),
      ).map((r) => r.path);
      return { ...emptyPrediction(instance, retriever, shape), ranked, files: ranked.slice(0, retriever.k) };
    },
    close: async () => undefined,
  };
}
