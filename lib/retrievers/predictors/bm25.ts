import { RANKED_DEPTH } from '../../reports';
import type { RetrieverConfig } from '../../../schemas/evaluation';
import { BlobTermStore, blobTermsDir } from '../bm25/blob-terms';
import { indexCommit, type CommitIndex } from '../bm25/commit-index';
import { listCommitFiles, type CommitFiles } from '../bm25/commit-files';
import { retrieveTopK } from '../bm25/retriever';
import type { EvaluationInstance } from '../../evaluation/instances';
import { emptyPrediction, failedPrediction, type OutputShape, type Predictor, type PredictorContext } from './predictor';
import { instanceGitDir, noRepository, RepositorySession, sharedCacheDir } from './repository';

/**
 * BM25 exactly as CodeGrep App. E over the instance's commit, read from the bare repository (no worktree): term
 * counts are cached by blob id in `<dataDir>/bm25-terms`, so a file shared by many commits is tokenized once
 * (lib/retrievers/bm25/commit-index.ts). `ranked` keeps the depth Acc@k reads. Told its shard's instances
 * (`upcoming`), it lists the next commit's tree while it indexes the current one.
 */
export function bm25Predictor(retriever: Extract<RetrieverConfig, { kind: 'bm25' }>, context: PredictorContext): Predictor {
  const shape: OutputShape = { ranked: true, lineRanges: false, modules: false, functions: false };
  const termsRoot = context.termCacheDir ?? sharedCacheDir(context.embeddingCacheDir, 'bm25-terms');
  const session = new RepositorySession((slug) => BlobTermStore.open(blobTermsDir(termsRoot, slug)), undefined, context.signal);
  const scan = { includeTests: !retriever.excludeTests, signal: context.signal };
  let last: { key: string; index: Promise<CommitIndex> } | null = null;
  let order: readonly EvaluationInstance[] = [];
  // The next commit's listing, started while the current commit is indexed (one ahead at most).
  let next: { key: string; listing: Promise<CommitFiles> } | null = null;
  const listAhead = async (after: EvaluationInstance, key: string) => {
    const position = order.indexOf(after);
    const following =
      position < 0 ? undefined : order.slice(position + 1).find((i) => i.repo !== after.repo || i.baseCommit !== after.baseCommit);
    if (!following) return;
    const gitDir = await instanceGitDir(following);
    const followingKey = gitDir ? `${gitDir}@${following.baseCommit}` : null;
    if (!gitDir || followingKey === key || next?.key === followingKey) return;
    const listing = listCommitFiles(gitDir, following.baseCommit, scan);
    listing.catch(() => undefined); // its error is thrown where the listing is used
    next = { key: followingKey!, listing };
  };
  return {
    concurrency: 1,
    upcoming(instances) {
      order = instances;
    },
    async predict(instance) {
      const gitDir = await instanceGitDir(instance);
      if (!gitDir) return failedPrediction(instance, retriever, shape, noRepository(instance));
      const key = `${gitDir}@${instance.baseCommit}`;
      if (last?.key !== key) {
        const { reader, value: store } = await session.get(instance, gitDir);
        const listing = next?.key === key ? next.listing : undefined;
        next = null;
        last = { key, index: indexCommit(store, reader, instance.baseCommit, { ...scan, ...(listing ? { listing } : {}) }) };
        await listAhead(instance, key);
      }
      let index: CommitIndex;
      try {
        index = await last.index;
      } catch (error) {
        return failedPrediction(instance, retriever, shape, (error as Error).message);
      }
      const ranked = retrieveTopK(index, instance.problemStatement, Math.max(retriever.k, RANKED_DEPTH)).map((r) => r.path);
      return { ...emptyPrediction(instance, retriever, shape), ranked, files: ranked.slice(0, retriever.k) };
    },
    close: () => session.close(),
  };
}
