import path from 'node:path';
import { RANKED_DEPTH } from '../../reports';
import type { RetrieverConfig } from '../../../schemas/evaluation';
import { BlobTermStore, blobTermsDir } from '../bm25/blob-terms';
import { indexCommit, type CommitIndex } from '../bm25/commit-index';
import { retrieveTopK } from '../bm25/retriever';
import { loadEmbeddingModel, releaseEmbeddingModel, retrieveDense, type EmbeddingModel } from '../dense';
import { BlobEmbeddingStore, blobEmbeddingsDir, blobEmbeddingsSettingsHash } from '../dense/blob-embeddings';
import { indexCommitDense, type DenseCommitIndex } from '../dense/commit-index';
import { chunkSettings } from '../dense/dense-index';
import { emptyPrediction, failedPrediction, PredictorFailure, type OutputShape, type Predictor, type PredictorContext } from './predictor';
import { instanceGitDir, noRepository, RepositorySession, sharedCacheDir } from './repository';

/**
 * The dense embedding retriever over the instance's commit, read from the bare repository (no worktree). By
 * default it ranks every file of the repository (as CodeGrep's dense baseline does, §4.1); chunk embeddings are
 * cached by blob id in `<dataDir>/embeddings/blobs`, so a file shared by many commits is embedded once. With
 * `bm25Candidates` (the BM25 prefilter, an option) only each instance's BM25 top files are embedded and ranked.
 * A model folder that cannot be loaded fails the shard (ConfigError).
 */
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
  const settings = chunkSettings(model, { maxChunksPerFile: retriever.maxChunksPerFile });
  const settingsHash = blobEmbeddingsSettingsHash(model, settings);
  const scan = { includeTests: !retriever.excludeTests };
  const embeddingsRoot = path.join(context.embeddingCacheDir, 'blobs');
  const termsRoot = context.termCacheDir ?? sharedCacheDir(context.embeddingCacheDir, 'bm25-terms');
  const session = new RepositorySession(
    async (slug) => ({
      embeddings: await BlobEmbeddingStore.open(blobEmbeddingsDir(embeddingsRoot, settingsHash, slug), settingsHash, model.dimension),
      terms: retriever.bm25Candidates ? await BlobTermStore.open(blobTermsDir(termsRoot, slug)) : null,
    }),
    undefined,
    context.signal,
  );
  let lastDense: { key: string; index: Promise<DenseCommitIndex> } | null = null;
  let lastBm25: { key: string; index: Promise<CommitIndex> } | null = null;
  const progress = context.onProgress;
  return {
    concurrency: 1,
    async predict(instance) {
      const gitDir = await instanceGitDir(instance);
      if (!gitDir) return failedPrediction(instance, retriever, shape, noRepository(instance));
      const key = `${gitDir}@${instance.baseCommit}`;
      const { reader, value: stores } = await session.get(instance, gitDir);
      const denseOptions = {
        ...scan,
        signal: context.signal,
        ...(progress
          ? {
              onProgress: (p: { done: number; total: number; chunks: number; blobsPerSecond: number | null; etaSeconds: number | null }) =>
                progress({
                  stage: 'embed',
                  done: p.done,
                  total: p.total,
                  unit: `blobs of ${instance.repo}@${instance.baseCommit.slice(0, 12)}`,
                  counts: {
                    chunks: p.chunks,
                    blobsPerSecond: Math.round((p.blobsPerSecond ?? 0) * 10) / 10,
                    etaSeconds: Math.round(p.etaSeconds ?? 0),
                  },
                }),
            }
          : {}),
      };
      let index: DenseCommitIndex;
      try {
        if (retriever.bm25Candidates) {
          // The BM25 prefilter: the instance's BM25 top files, embedded through the same blob-keyed store.
          if (lastBm25?.key !== key)
            lastBm25 = { key, index: indexCommit(stores.terms!, reader, instance.baseCommit, { ...scan, signal: context.signal }) };
          const candidates = new Set(
            retrieveTopK(await lastBm25.index, instance.problemStatement, retriever.bm25Candidates).map((r) => r.path),
          );
          index = await indexCommitDense(stores.embeddings, reader, model, settings, instance.baseCommit, {
            ...denseOptions,
            only: candidates,
          });
        } else {
          if (lastDense?.key !== key)
            lastDense = { key, index: indexCommitDense(stores.embeddings, reader, model, settings, instance.baseCommit, denseOptions) };
          index = await lastDense.index;
        }
      } catch (error) {
        if (context.signal.aborted) throw error;
        return failedPrediction(instance, retriever, shape, (error as Error).message);
      }
      const hits = await retrieveDense(index, instance.problemStatement, Math.max(retriever.k, RANKED_DEPTH));
      const ranked = hits.map((h) => h.path);
      return { ...emptyPrediction(instance, retriever, shape), ranked, files: ranked.slice(0, retriever.k) };
    },
    close: async () => {
      await session.close();
      await releaseEmbeddingModel(model);
    },
  };
}
