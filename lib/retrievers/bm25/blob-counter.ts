import { BINARY_SNIFF_BYTES } from './params';
import { grownInt32, type TermTable } from './term-table';
import { scanTokens } from './tokenizer';

/**
 * One document's BM25 term counts (CodeGrep App. E): its distinct terms in the order they first appear and how
 * often each occurs. The one implementation of counting, used in the caller's thread (blob-terms.ts) and in the
 * tokenizer threads (tokenizer-pool.ts), so both give the same counts by construction.
 */

export interface BlobTerms {
  /** A NUL in the first BINARY_SNIFF_BYTES bytes: not a document (worktree.ts skips it as `binary`). */
  binary: boolean;
  /** Ids in the counter's vocabulary, in first-appearance order. */
  termIds: Int32Array;
  counts: Int32Array;
}

/** Counts as they cross a thread: the distinct terms joined by a space (App. E tokens never hold whitespace). */
export interface CountedBlob {
  binary: boolean;
  terms: string;
  counts: Int32Array;
}

const EMPTY = new Int32Array(0);

export class BlobCounter {
  /** Scratch: frequency per term id and the document that last touched it. */
  private termCount = new Int32Array(1 << 14);
  private termSeenIn = new Int32Array(1 << 14).fill(-1);
  private documents = 0;
  private readonly current: number[] = [];
  private readonly countToken = (units: Uint16Array, length: number, hash: number): void => {
    const id = this.vocabulary.intern(units, 0, length, hash);
    if (id >= this.termCount.length) {
      this.termCount = grownInt32(this.termCount, id * 2, 0);
      this.termSeenIn = grownInt32(this.termSeenIn, id * 2, -1);
    }
    if (this.termSeenIn[id] !== this.documents) {
      this.termSeenIn[id] = this.documents;
      this.termCount[id] = 1;
      this.current.push(id);
    } else this.termCount[id] = this.termCount[id]! + 1;
  };

  constructor(readonly vocabulary: TermTable) {}

  /** Tokenizes a blob's bytes, decoded as UTF-8 as worktree.ts reads a file. */
  count(bytes: Buffer): BlobTerms {
    if (bytes.subarray(0, BINARY_SNIFF_BYTES).includes(0)) return { binary: true, termIds: EMPTY, counts: EMPTY };
    scanTokens(bytes.toString('utf8'), this.countToken);
    const termIds = Int32Array.from(this.current);
    const counts = new Int32Array(termIds.length);
    for (let k = 0; k < termIds.length; k++) counts[k] = this.termCount[termIds[k]!]!;
    this.current.length = 0;
    this.documents++;
    return { binary: false, termIds, counts };
  }

  /** `count`, with the terms as text (what a segment row stores and what crosses a thread). */
  countAsText(bytes: Buffer): CountedBlob {
    const { binary, termIds, counts } = this.count(bytes);
    return { binary, terms: joinTerms(this.vocabulary, termIds), counts };
  }
}

/** The terms of `termIds` joined by a space. */
export function joinTerms(vocabulary: TermTable, termIds: Int32Array): string {
  let terms = '';
  for (let k = 0; k < termIds.length; k++) terms += (k === 0 ? '' : ' ') + vocabulary.term(termIds[k]!);
  return terms;
}
