/**
 * Term → id table for building an index without allocating a string per token: tokens arrive as UTF-16
 * code units in a reused buffer with their FNV-1a hash (computed while tokenizing), are looked up by
 * open addressing, and only a NEW term is copied into the pool. Ids are dense, in first-insertion order.
 * `get(string)` looks a term up by its text (queries, tests).
 */

export const HASH_SEED = 0x811c9dc5 | 0;
export const FNV_PRIME = 0x01000193;

/** FNV-1a over the code units of `term`; the tokenizer computes exactly this while scanning. */
export function termHash(term: string): number {
  let hash = HASH_SEED;
  for (let i = 0; i < term.length; i++) hash = Math.imul(hash ^ term.charCodeAt(i), FNV_PRIME);
  return hash;
}

/** Spreads FNV's weak low bits before masking to a slot (murmur3's finaliser). */
function slotOf(hash: number, mask: number): number {
  let h = hash ^ (hash >>> 16);
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  return h & mask;
}

/** The string of units[start, end), decoded in chunks (a spread of a very long token would overflow the stack). */
export function unitsToString(units: Uint16Array, start: number, end: number): string {
  let text = '';
  for (let i = start; i < end; i += 8192) {
    text += String.fromCharCode.apply(null, units.subarray(i, Math.min(end, i + 8192)) as unknown as number[]);
  }
  return text;
}

/**
 * `array`'s entries in a new array of `size` (> its length), the rest `fill`: the scratch arrays indexed by term id
 * grow with the vocabulary.
 */
export function grownInt32(array: Int32Array, size: number, fill: number): Int32Array<ArrayBuffer> {
  const grown = new Int32Array(size).fill(fill);
  grown.set(array);
  return grown;
}

export class TermTable {
  /** Open-addressing slots, two ints each: the term's hash and its id + 1 (0 = empty). */
  private slots = new Int32Array(2 << 12);
  private mask = (1 << 12) - 1;
  /** Two ints per term: start in the pool and length. */
  private spans = new Int32Array(2 << 11);
  private pool = new Uint16Array(1 << 16);
  private poolLength = 0;
  private count = 0;
  private readonly strings: (string | undefined)[] = [];

  get size(): number {
    return this.count;
  }

  /** The id of units[offset, offset + length), or −1 − (the empty slot where it would go). */
  private find(units: Uint16Array, offset: number, length: number, hash: number): number {
    const { slots, spans, pool, mask } = this;
    for (let slot = slotOf(hash, mask); ; slot = (slot + 1) & mask) {
      const stored = slots[2 * slot + 1]!;
      if (stored === 0) return -1 - slot;
      if (slots[2 * slot] === hash) {
        const id = stored - 1;
        if (spans[2 * id + 1] === length) {
          const start = spans[2 * id]!;
          let i = 0;
          while (i < length && pool[start + i] === units[offset + i]) i++;
          if (i === length) return id;
        }
      }
    }
  }

  /** Id of the term units[offset, offset + length) with hash `hash`, or -1. */
  lookup(units: Uint16Array, offset: number, length: number, hash: number): number {
    const found = this.find(units, offset, length, hash);
    return found >= 0 ? found : -1;
  }

  /** Id of the term units[offset, offset + length) with hash `hash`, added when new. */
  intern(units: Uint16Array, offset: number, length: number, hash: number): number {
    const found = this.find(units, offset, length, hash);
    if (found >= 0) return found;
    const id = this.count++;
    if (2 * id === this.spans.length) {
      const spans = new Int32Array(this.spans.length * 2);
      spans.set(this.spans);
      this.spans = spans;
    }
    while (this.poolLength + length > this.pool.length) {
      const pool = new Uint16Array(this.pool.length * 2);
      pool.set(this.pool);
      this.pool = pool;
    }
    this.pool.set(units.subarray(offset, offset + length), this.poolLength);
    const slot = -1 - found;
    this.spans[2 * id] = this.poolLength;
    this.spans[2 * id + 1] = length;
    this.poolLength += length;
    this.slots[2 * slot] = hash;
    this.slots[2 * slot + 1] = id + 1;
    if (this.count * 2 > this.mask + 1) this.rehash();
    return id;
  }

  /** Id in this table of term `id` of `source`, added when new (copies its code units; no string is made). */
  internFrom(source: TermTable, id: number): number {
    const start = source.spans[2 * id]!;
    const length = source.spans[2 * id + 1]!;
    let hash = HASH_SEED;
    for (let i = start; i < start + length; i++) hash = Math.imul(hash ^ source.pool[i]!, FNV_PRIME);
    return this.intern(source.pool, start, length, hash);
  }

  /** Id of a term given as a string, or undefined. */
  get(term: string): number | undefined {
    const units = new Uint16Array(term.length);
    for (let i = 0; i < term.length; i++) units[i] = term.charCodeAt(i);
    const id = this.lookup(units, 0, term.length, termHash(term));
    return id < 0 ? undefined : id;
  }

  /** The text of term `id`. */
  term(id: number): string {
    if (!Number.isInteger(id) || id < 0 || id >= this.count) throw new RangeError(`no term with id ${id}`);
    let text = this.strings[id];
    if (text === undefined) {
      const start = this.spans[2 * id]!;
      text = unitsToString(this.pool, start, start + this.spans[2 * id + 1]!);
      this.strings[id] = text;
    }
    return text;
  }

  private rehash(): void {
    const old = this.slots;
    const capacity = (this.mask + 1) * 2;
    const slots = new Int32Array(2 * capacity);
    const mask = capacity - 1;
    for (let s = 0; s < old.length; s += 2) {
      const stored = old[s + 1]!;
      if (stored === 0) continue;
      const hash = old[s]!;
      let slot = slotOf(hash, mask);
      while (slots[2 * slot + 1] !== 0) slot = (slot + 1) & mask;
      slots[2 * slot] = hash;
      slots[2 * slot + 1] = stored;
    }
    this.slots = slots;
    this.mask = mask;
  }
}
