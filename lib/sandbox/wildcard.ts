/**
 * Linear-time wildcard matching for untrusted patterns (glob words in the terminal, `--glob` in the GNU
 * fallback). A pattern compiles to a tiny Thompson NFA that is simulated over the text with a set of live
 * states (a Pike VM without captures): every text character is looked at once per live state, so a match
 * costs at most O(text length × pattern length), whatever the pattern. A backtracking RegExp built from
 * the same pattern can take exponential time (`ls` with thirty `*` and a `Z` took 81 s), which is why no
 * RegExp is ever built from a model's pattern.
 */

/** One character test, on UTF-16 code units (what RegExp without the `u` flag sees). */
export type CharTest = (code: number) => boolean;

/** A wildcard pattern's shape, built by the glob parsers. */
export type WildNode =
  | { kind: 'char'; test: CharTest }
  /** Zero or more characters that each pass `test` (`*` is `repeat(not '/')`). */
  | { kind: 'repeat'; test: CharTest }
  | { kind: 'seq'; items: WildNode[] }
  | { kind: 'alt'; options: WildNode[] }
  | { kind: 'optional'; node: WildNode };

type Inst = { op: 'char'; test: CharTest } | { op: 'split'; x: number; y: number } | { op: 'jmp'; x: number } | { op: 'match' };

const SLASH = 0x2f;
export const notSlash: CharTest = (c) => c !== SLASH;
export const anyChar: CharTest = () => true;
export const literal =
  (code: number): CharTest =>
  (c) =>
    c === code;

/**
 * A bracket class (`[a-z_]`, `[!x]`): `body` is the text between the brackets, negation already removed;
 * every character in it is literal except `-` between two characters (a range). A negated class never
 * matches '/', like a shell's or ripgrep's.
 */
export function bracketClass(body: string, negate: boolean): CharTest {
  const ranges: Array<[number, number]> = [];
  for (let k = 0; k < body.length; k++) {
    const lo = body.charCodeAt(k);
    if (body[k + 1] === '-' && k + 2 < body.length) {
      ranges.push([lo, body.charCodeAt(k + 2)]);
      k += 2;
    } else ranges.push([lo, lo]);
  }
  const inside = (c: number) => ranges.some(([lo, hi]) => c >= lo && c <= hi);
  return negate ? (c) => c !== SLASH && !inside(c) : inside;
}

/**
 * Most `*`-like repeats plus alternative branches one pattern may have. Live states, and so the cost of
 * each character, grow with them: at 90, one 250-character name took up to 47 ms to match while the
 * automaton was still being built (and `[a-z]*` written 600 times, 50 ms per name). At 64 one name costs
 * at most about 30 ms cold (a few once the automaton is cached), inside the sandbox's 50 ms between
 * yields together with a 5 ms time slice; real globs have a handful.
 */
export const MAX_WILDCARDS = 64;

/** How many repeats and alternative branches `node` has (what MAX_WILDCARDS bounds). */
export function countWildcards(node: WildNode): number {
  switch (node.kind) {
    case 'char':
      return 0;
    case 'repeat':
      return 1;
    case 'seq':
      return node.items.reduce((sum, item) => sum + countWildcards(item), 0);
    case 'alt':
      return node.options.reduce((sum, option) => sum + countWildcards(option), node.options.length);
    case 'optional':
      return 1 + countWildcards(node.node);
  }
}

interface DfaState {
  pcs: Int32Array;
  accepting: boolean;
  /** Whether the state is in the cache (only cached states are linked as successors). */
  cached: boolean;
  next: Map<number, DfaState>;
}

/** Bound on the DFA cache: instruction indices held by all cached states together. */
const MAX_CACHED_PCS = 1 << 20;

function sameInstructions(a: Int32Array, b: Int32Array): boolean {
  if (a.length !== b.length) return false;
  for (let k = 0; k < a.length; k++) if (a[k] !== b[k]) return false;
  return true;
}

export class WildcardMatcher {
  private readonly program: Inst[] = [];
  private readonly seen: Uint32Array;
  private generation = 0;
  /** Cached states by a hash of their instruction set; a bucket holds the states that share a hash. */
  private readonly states = new Map<number, DfaState[]>();
  private cachedPcs = 0;
  private start: DfaState | undefined;

  constructor(root: WildNode) {
    this.emit(root);
    this.program.push({ op: 'match' });
    this.seen = new Uint32Array(this.program.length);
  }

  private emit(node: WildNode): void {
    const p = this.program;
    switch (node.kind) {
      case 'char':
        p.push({ op: 'char', test: node.test });
        return;
      case 'repeat': {
        // L: split(L+1, L+3); L+1: char; L+2: jmp L; L+3: ...
        const at = p.length;
        p.push({ op: 'split', x: at + 1, y: at + 3 }, { op: 'char', test: node.test }, { op: 'jmp', x: at });
        return;
      }
      case 'seq':
        for (const item of node.items) this.emit(item);
        return;
      case 'optional': {
        const split = { op: 'split' as const, x: p.length + 1, y: -1 };
        p.push(split);
        this.emit(node.node);
        split.y = p.length;
        return;
      }
      case 'alt': {
        const jumps: Array<{ op: 'jmp'; x: number }> = [];
        node.options.forEach((option, k) => {
          if (k < node.options.length - 1) {
            const split = { op: 'split' as const, x: p.length + 1, y: -1 };
            p.push(split);
            this.emit(option);
            const jump = { op: 'jmp' as const, x: -1 };
            p.push(jump);
            jumps.push(jump);
            split.y = p.length;
          } else this.emit(option);
        });
        for (const jump of jumps) jump.x = p.length;
        return;
      }
    }
  }

  /** Adds `pc` and everything reachable from it without reading a character. */
  private close(list: number[], start: number): void {
    const stack = [start];
    while (stack.length > 0) {
      const pc = stack.pop()!;
      if (this.seen[pc] === this.generation) continue;
      this.seen[pc] = this.generation;
      const inst = this.program[pc]!;
      if (inst.op === 'jmp') stack.push(inst.x);
      else if (inst.op === 'split') stack.push(inst.y, inst.x);
      else list.push(pc);
    }
  }

  /**
   * The state set as a cached DFA state: the set of live instructions, sorted, is the key, and each state
   * remembers its successor per character code. Building a state costs O(pattern length) once; matching
   * the many similar names of a listing then costs one map lookup per character. The cache is bounded;
   * past the bound states are built on the fly (same answers, no memory growth).
   */
  private stateFor(live: number[]): DfaState {
    // A numeric hash and a typed-array compare: joining hundreds of indices into a string key per step
    // was most of the cost of a cache miss.
    const pcs = Int32Array.from(live).sort();
    let hash = pcs.length;
    for (let k = 0; k < pcs.length; k++) hash = (Math.imul(hash, 0x01000193) ^ pcs[k]!) | 0;
    const bucket = this.states.get(hash);
    const known = bucket?.find((state) => sameInstructions(state.pcs, pcs));
    if (known) return known;
    const cached = this.cachedPcs + pcs.length <= MAX_CACHED_PCS;
    let accepting = false;
    for (let k = 0; k < pcs.length; k++) if (this.program[pcs[k]!]!.op === 'match') accepting = true;
    const state: DfaState = { pcs, accepting, cached, next: new Map() };
    if (cached) {
      if (bucket) bucket.push(state);
      else this.states.set(hash, [state]);
      this.cachedPcs += pcs.length;
    }
    return state;
  }

  private step(state: DfaState, code: number): DfaState {
    const cached = state.next.get(code);
    if (cached) return cached;
    this.generation += 1;
    const next: number[] = [];
    for (const pc of state.pcs) {
      const inst = this.program[pc]!;
      if (inst.op === 'char' && inst.test(code)) this.close(next, pc + 1);
    }
    const successor = this.stateFor(next);
    if (successor.cached) state.next.set(code, successor);
    return successor;
  }

  /** True when the whole of `text` matches. */
  matches(text: string): boolean {
    if (!this.start) {
      this.generation += 1;
      const first: number[] = [];
      this.close(first, 0);
      this.start = this.stateFor(first);
    }
    let state = this.start;
    for (let i = 0; i < text.length; i++) {
      state = this.step(state, text.charCodeAt(i));
      if (state.pcs.length === 0) return false;
    }
    return state.accepting;
  }
}
