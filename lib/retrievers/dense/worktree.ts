import { collectWorktreeFiles, type SkippedFile, type WorktreeScanOptions } from '../bm25/worktree';
import { buildDenseIndex, type DenseIndex, type DenseIndexOptions } from './dense-index';
import type { EmbeddingModel } from './embedding-model';

/**
 * The dense index of a worktree. The corpus is exactly BM25's (CodeGrep App. E, "Corpus": the Python files,
 * skipping __pycache__/, venv/, .venv/, env/, build/, dist/, .eggs/; tests included by default), read by the
 * BM25 retriever's walker, so the two baselines rank the same files.
 */

export interface DenseWorktreeIndex extends DenseIndex {
  root: string;
  skipped: SkippedFile[];
}

export async function indexWorktreeDense(
  root: string,
  commit: string,
  model: EmbeddingModel,
  opts: WorktreeScanOptions & DenseIndexOptions = {},
): Promise<DenseWorktreeIndex> {
  const { root: resolvedRoot, files, skipped } = await collectWorktreeFiles(root, opts);
  return { ...(await buildDenseIndex(files, commit, model, opts)), root: resolvedRoot, skipped };
}
