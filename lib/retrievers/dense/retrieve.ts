import { topKIndices } from '../bm25/ranking';
import type { DenseIndex } from './dense-index';
import { embedTexts } from './embedding-model';
import { DEFAULT_TOP_K } from './params';

/**
 * Dense retrieval: the query (the issue text) is embedded with the model's query prompt, truncated to the
 * model's maximum length; each chunk is scored by cosine similarity; a file's score is the maximum over its
 * chunks (a file is as relevant as its most relevant part, however long the rest of it is). The top-K files
 * come back highest score first, ties by insertion order (the same rule as BM25, App. E "Retrieval").
 */

export interface DenseRetrievedFile {
  path: string;
  /** Cosine similarity of the query and the file's best chunk, in [-1, 1]. */
  score: number;
  /** 1-based rank. */
  rank: number;
  /** The best chunk: its number within the file and its token span. */
  chunk: { index: number; tokenStart: number; tokenEnd: number };
}

export interface DenseScores {
  /** Per file, in insertion order. */
  scores: Float64Array;
  /** Per file, the index (into the index's chunk arrays) of its best chunk. */
  bestChunk: Int32Array;
}

/** Cosine of `query` with every chunk, reduced to the best chunk per file. */
export function denseScores(index: Omit<DenseIndex, 'stats'>, query: Float32Array): DenseScores {
  const { dimension, embeddings, chunkNorms, chunkFile } = index;
  const n = index.paths.length;
  if (chunkFile.length > 0 && query.length !== dimension) {
    throw new Error(`denseScores: query vector has ${query.length} dimensions, the index ${dimension}`);
  }
  let squares = 0;
  for (const v of query) squares += v * v;
  const queryNorm = Math.sqrt(squares);
  const scores = new Float64Array(n).fill(Number.NEGATIVE_INFINITY);
  const bestChunk = new Int32Array(n).fill(-1);
  for (let c = 0; c < chunkFile.length; c++) {
    let dot = 0;
    const offset = c * dimension;
    for (let d = 0; d < dimension; d++) dot += query[d]! * embeddings[offset + d]!;
    const denominator = queryNorm * chunkNorms[c]!;
    const cosine = denominator === 0 ? 0 : dot / denominator;
    const file = chunkFile[c]!;
    if (cosine > scores[file]!) {
      scores[file] = cosine;
      bestChunk[file] = c;
    }
  }
  return { scores, bestChunk };
}

/** The top-K files of the index for a query text. Always min(K, number of files) results. */
export async function retrieveDense(
  index: Omit<DenseIndex, 'stats'>,
  query: string,
  k: number = DEFAULT_TOP_K,
): Promise<DenseRetrievedFile[]> {
  if (!Number.isInteger(k) || k < 1) throw new RangeError(`k must be a positive integer, got ${k}`);
  if (index.paths.length === 0) return [];
  const [vector] = await embedTexts(index.model, [query], 'query');
  const { scores, bestChunk } = denseScores(index, vector!);
  return topKIndices(scores, k).map((file, i) => {
    const c = bestChunk[file]!;
    let first = c;
    while (first > 0 && index.chunkFile[first - 1] === file) first--;
    return {
      path: index.paths[file]!,
      score: scores[file]!,
      rank: i + 1,
      chunk: { index: c - first, tokenStart: index.chunkSpans[c]!.start, tokenEnd: index.chunkSpans[c]!.end },
    };
  });
}
