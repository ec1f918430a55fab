export {
  loadEmbeddingModel,
  releaseEmbeddingModel,
  embedTexts,
  embedTokenSequences,
  type EmbeddingModel,
  type EmbeddingModelOptions,
} from './embedding-model';
export { ModelFolderError, type ModelFolderOverrides } from './model-folder';
export { buildDenseIndex, type DenseIndex, type DenseIndexOptions, type DenseIndexStats } from './dense-index';
export { indexWorktreeDense, type DenseWorktreeIndex } from './worktree';
export { retrieveDense, denseScores, type DenseRetrievedFile, type DenseScores } from './retrieve';
export type { PoolingMode } from './pooling';
