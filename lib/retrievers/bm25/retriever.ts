import { normalizeRepoPath } from '../../paths/normalize';
import { DEFAULT_OKAPI_PARAMS, OkapiBuilder, okapiScoresInto, type OkapiIndex, type OkapiParams } from './okapi';
import { DEFAULT_TOP_K, PATH_INDEX_WEIGHT } from './params';
import { topKIndices } from './ranking';
import { tokenize } from './tokenizer';

/**
 * The BM25 baseline of CodeGrep App. E: a content index over each file's text plus a second index over
 * the file's path, both BM25 Okapi over App. E tokens; a file's score is content + 2 × path
 * ("added its scores to the content BM25 scores with a 2× weight").
 *
 * The path document is the App. E tokenisation of the repository-relative path. That tokenizer keeps `/`
 * and `.`, so a path is normally ONE token ("django/contrib/admin/forms.py"), and the path index only fires
 * when the issue quotes a path exactly; App. E reports that the path index changes nothing for this reason
 * ("our tokenizer preserves the path separators . and / within tokens, so file-path fragments already appear
 * as long tokens inside the content index"). Set `pathWeight: 0` for App. E's content-only variant A.
 */

export interface Bm25Options extends Partial<OkapiParams> {
  /** Weight of the path index (default 2, App. E variant B). */
  pathWeight?: number;
}

export interface SourceFile {
  /** Repository-relative path (normalised on the way in). */
  path: string;
  content: string;
}

export interface Bm25Index {
  /** Paths in insertion order; position = document id = tie-break rank. */
  paths: string[];
  content: OkapiIndex;
  path: OkapiIndex;
  pathWeight: number;
  /** Reused score buffers: one index is queried many times, one query at a time. */
  scratch: { content: Float64Array; path: Float64Array };
}

export interface RetrievedFile {
  path: string;
  score: number;
  /** 1-based rank. */
  rank: number;
  /** False for a file taken only to fill the K slots (App. E's fallback: it scored exactly 0). */
  matched: boolean;
}

/**
 * Builds the content and path indexes of `files`, in the given order (the tie-break order). Throws when two
 * files normalise to the same path or a path is empty.
 */
export function buildBm25Index(files: Iterable<SourceFile>, opts: Bm25Options = {}): Bm25Index {
  return buildBm25IndexOf(
    files,
    (file) => file.path,
    (content, file) => content.addText(file.content),
    opts,
  );
}

/**
 * `buildBm25Index` over any kind of document: `addContent` adds the item's content document to the content
 * index (its text, or its cached term counts: commit-index.ts), the path index gets the item's path.
 */
export function buildBm25IndexOf<T>(
  items: Iterable<T>,
  pathOf: (item: T) => string,
  addContent: (content: OkapiBuilder, item: T) => void,
  opts: Bm25Options = {},
): Bm25Index {
  const params: OkapiParams = {
    k1: opts.k1 ?? DEFAULT_OKAPI_PARAMS.k1,
    b: opts.b ?? DEFAULT_OKAPI_PARAMS.b,
    epsilon: opts.epsilon ?? DEFAULT_OKAPI_PARAMS.epsilon,
  };
  const pathWeight = opts.pathWeight ?? PATH_INDEX_WEIGHT;
  if (!Number.isFinite(pathWeight) || pathWeight < 0) throw new RangeError(`pathWeight must be a finite number >= 0, got ${pathWeight}`);
  const content = new OkapiBuilder(params);
  const path = new OkapiBuilder(params);
  const paths: string[] = [];
  const seen = new Set<string>();
  for (const item of items) {
    const raw = pathOf(item);
    const normalized = normalizeRepoPath(raw);
    if (normalized === '') throw new Error(`buildBm25Index: file #${paths.length} has an empty path (${JSON.stringify(raw)})`);
    if (seen.has(normalized)) throw new Error(`buildBm25Index: path ${JSON.stringify(normalized)} appears twice`);
    seen.add(normalized);
    paths.push(normalized);
    addContent(content, item);
    path.addText(normalized);
  }
  const n = paths.length;
  return {
    paths,
    content: content.build(),
    path: path.build(),
    pathWeight,
    scratch: { content: new Float64Array(n), path: new Float64Array(n) },
  };
}

/**
 * Combined score of every file for already tokenised query tokens, written into `out`:
 * content + pathWeight × path, evaluated like numpy's `content + 2 * path`.
 */
export function bm25ScoresForTokens(index: Bm25Index, queryTokens: readonly string[], out?: Float64Array): Float64Array {
  const n = index.paths.length;
  const scores = out ?? new Float64Array(n);
  okapiScoresInto(index.content, queryTokens, scores);
  if (index.pathWeight !== 0) {
    const pathScores = okapiScoresInto(index.path, queryTokens, index.scratch.path);
    const w = index.pathWeight;
    for (let d = 0; d < n; d++) scores[d] = scores[d]! + w * pathScores[d]!;
  }
  return scores;
}

/** Combined BM25 score of every indexed file for a query text (the issue text), in insertion order. */
export function bm25Scores(index: Bm25Index, query: string): Float64Array {
  return bm25ScoresForTokens(index, tokenize(query));
}

/**
 * The top-K files for a query (App. E, "Retrieval"): highest combined score first, ties by insertion order.
 * Always min(K, N) files: "if fewer than K files have non-zero score, we still return the top-scoring 1–K as
 * a fallback"; those fallback files carry `matched: false`.
 */
export function retrieveTopK(index: Bm25Index, query: string, k: number = DEFAULT_TOP_K): RetrievedFile[] {
  const scores = bm25ScoresForTokens(index, tokenize(query), index.scratch.content);
  return topKIndices(scores, k).map((d, i) => ({
    path: index.paths[d]!,
    score: scores[d]!,
    rank: i + 1,
    matched: scores[d] !== 0,
  }));
}
