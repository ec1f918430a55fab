import { FNV_PRIME, HASH_SEED, unitsToString } from './term-table';

/**
 * The BM25 baseline's tokenizer, CodeGrep App. E ("Tokenization"), applied identically to documents, paths
 * and queries: split on whitespace, strip characters outside [a-zA-Z0-9_./], lower-case, drop tokens shorter
 * than 2 characters, drop tokens beginning with "http". No camelCase/snake_case splitting, no stop words,
 * no stemming: App. E calls it "deliberately simple".
 *
 * "Whitespace" is Python's `str.split()` set (the baseline is a Python rank_bm25 pipeline): it differs from
 * JavaScript's `\s` (Python also splits on U+001C–U+001F and U+0085; JavaScript also on U+FEFF). The steps
 * are applied in App. E's order, so "HTTP://x" is dropped (lower-cased before the http test) and
 * "(https://x)" is dropped too (the "(" is stripped first).
 *
 * One scanner implements the rules. It writes each token's code units into a reused buffer and hashes them
 * on the way, so an index can be built without a string per token (see TermTable); `tokenize` is the same
 * scanner returning strings.
 */

function isPythonWhitespace(c: number): boolean {
  if (c <= 0x20) return c === 0x20 || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f);
  if (c < 0x85) return false;
  return (
    c === 0x85 ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000
  );
}

/**
 * What each ASCII code unit becomes: WHITESPACE ends a word, STRIP is dropped, anything else is the code
 * unit the token keeps (upper case already lowered). Non-ASCII units are whitespace or stripped.
 */
const WHITESPACE = -1;
const STRIP = -2;
const ASCII_MAP: Int32Array = (() => {
  const map = new Int32Array(128).fill(STRIP);
  for (let c = 0; c < 128; c++) {
    if (isPythonWhitespace(c)) map[c] = WHITESPACE;
    else if ((c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x5f || c === 0x2e || c === 0x2f) map[c] = c;
    else if (c >= 0x41 && c <= 0x5a) map[c] = c + 32;
  }
  return map;
})();

const H = 0x68;
const T = 0x74;
const P = 0x70;

/** Receives a token as units[0, length) (a buffer reused for the next token) and its TermTable hash. */
export type TokenSink = (units: Uint16Array, length: number, hash: number) => void;

let sharedBuffer = new Uint16Array(4096);

/** Runs the App. E rules over `text`, calling `sink` for every token in order. */
export function scanTokens(text: string, sink: TokenSink): void {
  const map = ASCII_MAP;
  let buffer = sharedBuffer;
  const n = text.length;
  let i = 0;
  while (i < n) {
    let length = 0;
    let hash = HASH_SEED;
    let inWord = false;
    for (; i < n; i++) {
      const c = text.charCodeAt(i);
      const mapped = c < 128 ? map[c]! : isPythonWhitespace(c) ? WHITESPACE : STRIP;
      if (mapped >= 0) {
        inWord = true;
        if (length === buffer.length) {
          const grown = new Uint16Array(buffer.length * 2);
          grown.set(buffer);
          buffer = sharedBuffer = grown;
        }
        buffer[length++] = mapped;
        hash = Math.imul(hash ^ mapped, FNV_PRIME);
      } else if (mapped === STRIP) {
        inWord = true;
      } else if (inWord) {
        break;
      }
    }
    if (length < 2) continue;
    if (length >= 4 && buffer[0] === H && buffer[1] === T && buffer[2] === T && buffer[3] === P) continue;
    sink(buffer, length, hash);
  }
}

/** Calls `emit` with every token of `text` as a string, in order. */
export function forEachToken(text: string, emit: (token: string) => void): void {
  scanTokens(text, (units, length) => emit(unitsToString(units, 0, length)));
}

/** The App. E tokens of `text`. */
export function tokenize(text: string): string[] {
  const tokens: string[] = [];
  forEachToken(text, (t) => tokens.push(t));
  return tokens;
}
