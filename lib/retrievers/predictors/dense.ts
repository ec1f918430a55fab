import path from 'node:path';
import { RANKED_DEPTH } from '../../reports';
import type { RetrieverConfig } from '../../../schemas/evaluation';
import { BlobTermStore, blobTermsDir } from '../bm25/blob-terms';
import { indexCommit, type CommitIndex } from '../bm25/commit-index';
import { retrieveTopK } from '../bm25/retriever';
import { loadEmbeddingModel, releaseEmbeddingModel, retrieveDense, type EmbeddingModel } from '../dense';
import { BlobEmbeddingStore, blobEmbeddingsDir, blobEmbeddingsSettingsHash } from '../dense/blob-embeddings';
import { indexCommitDense, type DenseCommitIndex, type DenseCommitOptions, type DenseEmbeddingProgress } from '../dense/commit-index';
import { chunkSettings, type ChunkSettings } from '../dense/dense-index';
import type { EvaluationInstance } from '../../evaluation/instances';
import type { BlobReader } from '../../worktrees/cat-file';
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
  const model = await loadModelOrFail(retriever);
  const settings = chunkSettings(model, { maxChunksPerFile: retriever.maxChunksPerFile });
  const scan = { includeTests: !retriever.excludeTests };
  const session = openStoreSession(retriever, context, model, settings);
  const indexOf = commitIndexer(retriever, model, settings, scan, context.signal);
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
        ...(progress ? { onProgress: embedProgress(progress, instance) } : {}),
      };
      let index: DenseCommitIndex;
      try {
        index = await indexOf(instance, key, reader, stores, denseOptions);
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

type DenseRetriever = Extract<RetrieverConfig, { kind: 'dense' }>;

/** A repository's stores: its blob embeddings, and its BM25 term counts when BM25 prefilters. */
interface DenseStores {
  embeddings: BlobEmbeddingStore;
  terms: BlobTermStore | null;
}

/** The retriever's model; a folder that cannot be loaded is a ConfigError. */
async function loadModelOrFail(retriever: DenseRetriever): Promise<EmbeddingModel> {
  try {
    return await loadEmbeddingModel(retriever.modelDir);
  } catch (error) {
    throw new PredictorFailure('ConfigError', true, `dense retriever "${retriever.name}": ${(error as Error).message}`);
  }
}

function openStoreSession(
  retriever: DenseRetriever,
  context: PredictorContext,
  model: EmbeddingModel,
  settings: ChunkSettings,
): RepositorySession<DenseStores> {
  const settingsHash = blobEmbeddingsSettingsHash(model, settings);
  const embeddingsRoot = path.join(context.embeddingCacheDir, 'blobs');
  const termsRoot = context.termCacheDir ?? sharedCacheDir(context.embeddingCacheDir, 'bm25-terms');
  return new RepositorySession(
    async (slug) => ({
      embeddings: await BlobEmbeddingStore.open(blobEmbeddingsDir(embeddingsRoot, settingsHash, slug), settingsHash, model.dimension),
      terms: retriever.bm25Candidates ? await BlobTermStore.open(blobTermsDir(termsRoot, slug)) : null,
    }),
    undefined,
    context.signal,
  );
}

/** The embedding progress of one instance's commit, as the stage's progress. */
function embedProgress(progress: NonNullable<PredictorContext['onProgress']>, instance: EvaluationInstance) {
  return (p: DenseEmbeddingProgress) =>
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
    });
}

/**
 * The dense index an instance is ranked in. Without the BM25 prefilter it is the whole commit's, kept while the
 * instances of one commit follow each other; with it, the commit's BM25 index is kept and each instance's BM25
 * top files are embedded through the same blob-keyed store.
 */
function commitIndexer(
  retriever: DenseRetriever,
  model: EmbeddingModel,
  settings: ChunkSettings,
  scan: { includeTests: boolean },
  signal: AbortSignal,
): (
  instance: EvaluationInstance,
  key: string,
  reader: BlobReader,
  stores: DenseStores,
  options: DenseCommitOptions,
) => Promise<DenseCommitIndex> {
  let lastDense: { key: string; index: Promise<DenseCommitIndex> } | null = null;
  let lastBm25: { key: string; index: Promise<CommitIndex> } | null = null;
  return async (instance, key, reader, stores, options) => {
    if (retriever.bm25Candidates) {
      if (lastBm25?.key !== key) lastBm25 = { key, index: indexCommit(stores.terms!, reader, instance.baseCommit, { ...scan, signal }) };
      const candidates = new Set(
        retrieveTopK(await lastBm25.index, instance.problemStatement, retriever.bm25Candidates).map((r) => r.path),
      );
      return await indexCommitDense(stores.embeddings, reader, model, settings, instance.baseCommit, { ...options, only: candidates });
    }
    if (lastDense?.key !== key)
      lastDense = { key, index: indexCommitDense(stores.embeddings, reader, model, settings, instance.baseCommit, options) };
    return await lastDense.index;
  };
}
