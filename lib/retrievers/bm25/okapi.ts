import { BM25_B, BM25_EPSILON, BM25_K1 } from './params';
import { TermTable, grownInt32, termHash } from './term-table';
import { scanTokens } from './tokenizer';

/**
 * BM25 Okapi as rank_bm25 0.2.2's `BM25Okapi` computes it (App. E uses that library with its defaults),
 * reproduced operation for operation so scores agree to the last bit up to `Math.log`'s rounding:
 *
 *   avgdl      = (total tokens) / N
 *   idf(t)     = log(N − n(t) + 0.5) − log(n(t) + 0.5)           (two logs, as rank_bm25 writes it)
 *   average_idf = Σ idf(t) / |V|, summed in first-appearance order of the terms (rank_bm25's dict order)
 *   idf(t) < 0 → idf(t) = epsilon × average_idf                   (the floor; idf = 0 stays 0)
 *   score(d, q) = Σ over query tokens q_i, WITH repeats, in query order:
 *                 idf(q_i) · tf·(k1 + 1) / (tf + k1·((1 − b) + b·|d|/avgdl))
 *
 * Unlike rank_bm25, which loops over every document for every query token, the index stores postings lists
 * (term id → documents containing it) with the per-posting factor tf·(k1+1)/(tf + k1·(…)) precomputed, so a
 * query touches only documents that contain its terms. Documents without the term would add idf·0 = ±0 in
 * rank_bm25, which leaves the sum unchanged, so skipping them is exact.
 *
 * Degenerate corpora that make rank_bm25 raise (no documents, or no tokens at all) are accepted: every
 * score is 0.
 */

export interface OkapiParams {
  k1: number;
  b: number;
  epsilon: number;
}

export const DEFAULT_OKAPI_PARAMS: OkapiParams = { k1: BM25_K1, b: BM25_B, epsilon: BM25_EPSILON };

export interface OkapiIndex {
  params: OkapiParams;
  /** N. */
  documentCount: number;
  /** Term → id; ids follow first appearance across documents in order. */
  vocabulary: TermTable;
  /** IDF per term id, after the epsilon floor. */
  idf: Float64Array;
  /** Mean of the raw IDFs (before the floor). 0 for an empty vocabulary. */
  averageIdf: number;
  /** Mean document length in tokens. */
  averageLength: number;
  documentLengths: Int32Array;
  /** Postings of term t are postingDocs[termOffsets[t] .. termOffsets[t + 1]), documents ascending. */
  termOffsets: Int32Array;
  postingDocs: Int32Array;
  /** tf·(k1+1)/(tf + k1·((1−b) + b·|d|/avgdl)) for each posting. */
  postingWeights: Float64Array;
}

/** A growable Int32 buffer (term ids and frequencies of all documents, before inversion). */
class IntBuffer {
  data = new Int32Array(1024);
  length = 0;
  push(value: number): void {
    if (this.length === this.data.length) {
      const grown = new Int32Array(this.data.length * 2);
      grown.set(this.data);
      this.data = grown;
    }
    this.data[this.length++] = value;
  }
}

/**
 * Builds an index one document at a time. Documents get ids 0, 1, 2 … in the order they are added, which
 * is also the tie-break order of the retrievers.
 */
export class OkapiBuilder {
  private readonly vocabulary = new TermTable();
  private readonly documentLengths = new IntBuffer();
  /** Per document, its distinct term ids and their frequencies, concatenated; documentEnds marks the ends. */
  private readonly documentTerms = new IntBuffer();
  private readonly documentFrequencies = new IntBuffer();
  private readonly documentEnds = new IntBuffer();
  /** Scratch: frequency of each term in the current document, and the document that last touched it. */
  private termCount = new Int32Array(1024);
  private termSeenIn = new Int32Array(1024).fill(-1);
  /** The current document's distinct terms, in first-appearance order. */
  private readonly currentTerms: number[] = [];
  private documentCount = 0;
  private currentLength = 0;
  private totalLength = 0;
  /** Source table of addTermCounts and its id → (our id + 1) map (0: not interned yet). */
  private remapSource: TermTable | null = null;
  private remap = new Int32Array(0);
  private readonly addToken = (units: Uint16Array, length: number, hash: number): void => {
    this.countTerm(this.vocabulary.intern(units, 0, length, hash), 1);
  };

  /** Counts `times` occurrences of term `id` in the current document. */
  private countTerm(id: number, times: number): void {
    if (id >= this.termCount.length) {
      this.termCount = grownInt32(this.termCount, id * 2, 0);
      this.termSeenIn = grownInt32(this.termSeenIn, id * 2, -1);
    }
    this.currentLength += times;
    if (this.termSeenIn[id] !== this.documentCount) {
      this.termSeenIn[id] = this.documentCount;
      this.termCount[id] = times;
      this.currentTerms.push(id);
    } else {
      this.termCount[id] = this.termCount[id]! + times;
    }
  }

  constructor(private readonly params: OkapiParams = DEFAULT_OKAPI_PARAMS) {}

  /** Adds a document given as its tokens; returns its id. */
  addTokens(tokens: Iterable<string>): number {
    for (const token of tokens) {
      const units = new Uint16Array(token.length);
      for (let i = 0; i < token.length; i++) units[i] = token.charCodeAt(i);
      this.addToken(units, token.length, termHash(token));
    }
    return this.finishDocument();
  }

  /**
   * Adds a document given as its term counts: term ids of `source` with their frequencies, in the order the
   * terms first appear in the document (how blob-terms.ts stores a tokenized blob). The index is then exactly
   * the one `addText` of the document's text builds: same term ids, same postings, same IDF summation order.
   */
  addTermCounts(source: TermTable, termIds: Int32Array, counts: Int32Array): number {
    if (termIds.length !== counts.length) throw new RangeError(`addTermCounts: ${termIds.length} term ids but ${counts.length} counts`);
    if (this.remapSource !== source) {
      this.remapSource = source;
      this.remap = new Int32Array(Math.max(1024, source.size));
    }
    if (this.remap.length < source.size) {
      const grown = new Int32Array(source.size * 2);
      grown.set(this.remap);
      this.remap = grown;
    }
    for (let k = 0; k < termIds.length; k++) {
      const global = termIds[k]!;
      let id = this.remap[global]! - 1;
      if (id < 0) {
        id = this.vocabulary.internFrom(source, global);
        this.remap[global] = id + 1;
      }
      this.countTerm(id, counts[k]!);
    }
    return this.finishDocument();
  }

  /** Adds a document given as text, tokenized with the App. E tokenizer; returns its id. */
  addText(text: string): number {
    scanTokens(text, this.addToken);
    return this.finishDocument();
  }

  private finishDocument(): number {
    for (const id of this.currentTerms) {
      this.documentTerms.push(id);
      this.documentFrequencies.push(this.termCount[id]!);
    }
    this.currentTerms.length = 0;
    this.documentEnds.push(this.documentTerms.length);
    this.documentLengths.push(this.currentLength);
    this.totalLength += this.currentLength;
    this.currentLength = 0;
    return this.documentCount++;
  }

  build(): OkapiIndex {
    const { k1, b, epsilon } = this.params;
    const n = this.documentCount;
    const vocabularySize = this.vocabulary.size;
    const documentLengths = this.documentLengths.data.slice(0, n);
    const ends = this.documentEnds.data;
    const terms = this.documentTerms.data;
    const frequencies = this.documentFrequencies.data;
    const postingCount = this.documentTerms.length;

    const termOffsets = new Int32Array(vocabularySize + 1);
    for (let p = 0; p < postingCount; p++) {
      const slot = terms[p]! + 1;
      termOffsets[slot] = termOffsets[slot]! + 1;
    }
    for (let t = 0; t < vocabularySize; t++) termOffsets[t + 1] = termOffsets[t + 1]! + termOffsets[t]!;

    // Same expression and order of operations as rank_bm25 (see module comment).
    const averageLength = n === 0 ? 0 : this.totalLength / n;
    const postingDocs = new Int32Array(postingCount);
    const postingWeights = new Float64Array(postingCount);
    const cursor = termOffsets.slice(0, vocabularySize);
    let start = 0;
    for (let d = 0; d < n; d++) {
      const end = ends[d]!;
      const norm = k1 * (1 - b + (b * documentLengths[d]!) / averageLength);
      for (let p = start; p < end; p++) {
        const tf = frequencies[p]!;
        const term = terms[p]!;
        const slot = cursor[term]!;
        cursor[term] = slot + 1;
        postingDocs[slot] = d;
        postingWeights[slot] = (tf * (k1 + 1)) / (tf + norm);
      }
      start = end;
    }

    const idf = new Float64Array(vocabularySize);
    let idfSum = 0;
    for (let t = 0; t < vocabularySize; t++) {
      const documentFrequency = termOffsets[t + 1]! - termOffsets[t]!;
      const value = Math.log(n - documentFrequency + 0.5) - Math.log(documentFrequency + 0.5);
      idf[t] = value;
      idfSum += value;
    }
    const averageIdf = vocabularySize === 0 ? 0 : idfSum / vocabularySize;
    const floor = epsilon * averageIdf;
    for (let t = 0; t < vocabularySize; t++) if (idf[t]! < 0) idf[t] = floor;

    return {
      params: { ...this.params },
      documentCount: n,
      vocabulary: this.vocabulary,
      idf,
      averageIdf,
      averageLength,
      documentLengths,
      termOffsets,
      postingDocs,
      postingWeights,
    };
  }
}

/** Index of tokenised documents (ids = positions in `documents`). */
export function buildOkapiIndex(documents: Iterable<readonly string[]>, params: OkapiParams = DEFAULT_OKAPI_PARAMS): OkapiIndex {
  const builder = new OkapiBuilder(params);
  for (const doc of documents) builder.addTokens(doc);
  return builder.build();
}

/**
 * rank_bm25's `get_scores(query)` written into `out` (length N, overwritten): the BM25 score of every
 * document, in document order.
 */
export function okapiScoresInto(index: OkapiIndex, queryTokens: readonly string[], out: Float64Array): Float64Array {
  if (out.length !== index.documentCount) {
    throw new RangeError(`score buffer has length ${out.length}, the index has ${index.documentCount} documents`);
  }
  out.fill(0);
  const { vocabulary, idf, termOffsets, postingDocs, postingWeights } = index;
  for (const token of queryTokens) {
    const t = vocabulary.get(token);
    if (t === undefined) continue;
    const termIdf = idf[t]!;
    if (termIdf === 0) continue;
    const end = termOffsets[t + 1]!;
    for (let p = termOffsets[t]!; p < end; p++) {
      const d = postingDocs[p]!;
      out[d] = out[d]! + termIdf * postingWeights[p]!;
    }
  }
  return out;
}

/** rank_bm25's `get_scores(query)` in a new array. */
export function okapiScores(index: OkapiIndex, queryTokens: readonly string[]): Float64Array {
  return okapiScoresInto(index, queryTokens, new Float64Array(index.documentCount));
}
