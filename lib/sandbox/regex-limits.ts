import { SANDBOX_LIMITS } from './limits';

/**
 * Class escapes that are large automata in ripgrep's Unicode mode (`\w` is hundreds of ranges, hundreds of
 * UTF-8 states): `\w{300}` alone takes rg 90 MB to compile. Each counts this many states in the size
 * estimate below; any other atom counts one.
 */
const UNICODE_CLASS_WEIGHT = 100;
const UNICODE_CLASS_ESCAPES = 'wWdDsSpP';

interface Frame {
  /** Sizes of the finished alternatives of this group. */
  alternatives: number;
  /** Size of the alternative being read. */
  branch: number;
  /** Size of the last item of the branch, which a following repetition multiplies. */
  last: number;
}

/** The size estimate being built: one frame per open group, the whole pattern's first. */
class SizeEstimator {
  private readonly stack: Frame[] = [{ alternatives: 0, branch: 0, last: 0 }];

  private top(): Frame {
    return this.stack[this.stack.length - 1]!;
  }

  /** Whether a group is open: a ')' with none open is a literal. */
  get inGroup(): boolean {
    return this.stack.length > 1;
  }

  atom(size: number): void {
    const frame = this.top();
    frame.branch += size;
    frame.last = size;
  }

  openGroup(): void {
    this.stack.push({ alternatives: 0, branch: 0, last: 0 });
  }

  closeGroup(): void {
    const frame = this.stack.pop()!;
    this.atom(frame.alternatives + frame.branch);
  }

  /** A '|': the branch read so far is finished, the next starts empty. */
  alternative(): void {
    const frame = this.top();
    frame.alternatives += frame.branch;
    frame.branch = 0;
    frame.last = 0;
  }

  /** A counted repetition: the last item is there `count` times. */
  repeat(count: number): void {
    const frame = this.top();
    frame.branch += frame.last * (Math.max(1, count) - 1);
    frame.last *= Math.max(1, count);
  }

  /** The whole pattern's size, groups left open closed at its end. */
  finish(): number {
    while (this.stack.length > 1) this.closeGroup();
    const root = this.top();
    return root.alternatives + root.branch;
  }
}

/** Where the bracket class opened at `open` ends: ']' right after '[' or '[^' is literal, '[:name:]' is one token inside. */
function bracketClassEnd(pattern: string, open: number): number {
  let j = open + 1;
  if (pattern[j] === '^') j += 1;
  if (pattern[j] === ']') j += 1;
  while (j < pattern.length && pattern[j] !== ']') {
    if (pattern[j] === '[' && pattern[j + 1] === ':') {
      const close = pattern.indexOf(':]', j + 2);
      j = close === -1 ? j + 1 : close + 2;
    } else if (pattern[j] === '\\') j += 2;
    else j += 1;
  }
  return j;
}

/**
 * Estimates the size of the automaton a regex compiles to, in one left-to-right scan (no RegExp): a
 * sequence adds its items, an alternation adds its branches, a counted repetition multiplies the item
 * before it (a group with all its branches: `(a|b|c){n}` is 3n, `(x{m}){n}` is mn). Groups are '(' ... ')'
 * and BRE's '\(' ... '\)'; '|' and BRE's '\|' separate branches; a class '[...]' is one atom. Returns the
 * estimate and the largest single bound seen.
 */
function estimateSize(pattern: string): { size: number; largestBound: number; largestBoundText: string } {
  const estimate = new SizeEstimator();
  let largestBound = 0;
  let largestBoundText = '';
  let i = 0;
  while (i < pattern.length) {
    const c = pattern[i]!;
    const next = pattern[i + 1];
    if (c === '\\' && next === '(') {
      estimate.openGroup();
      i += 2;
    } else if (c === '\\' && next === ')' && estimate.inGroup) {
      estimate.closeGroup();
      i += 2;
    } else if (c === '\\' && next === '|') {
      estimate.alternative();
      i += 2;
    } else if (c === '(') {
      estimate.openGroup();
      i += 1;
    } else if (c === ')' && estimate.inGroup) {
      estimate.closeGroup();
      i += 1;
    } else if (c === '|') {
      estimate.alternative();
      i += 1;
    } else if (c === '[') {
      estimate.atom(1);
      i = bracketClassEnd(pattern, i) + 1;
    } else if (c === '{' || (c === '\\' && next === '{')) {
      const bound = readBound(pattern, c === '{' ? i + 1 : i + 2);
      if (bound === null) {
        estimate.atom(1); // not a repetition: a literal '{'
        i += c === '{' ? 1 : 2;
        continue;
      }
      if (bound.largest > largestBound) {
        largestBound = bound.largest;
        largestBoundText = pattern.slice(i, bound.end);
      }
      estimate.repeat(bound.largest);
      i = bound.end;
    } else if (c === '\\') {
      estimate.atom(next !== undefined && UNICODE_CLASS_ESCAPES.includes(next) ? UNICODE_CLASS_WEIGHT : 1);
      i += 2;
    } else if (c === '*' || c === '+' || c === '?') {
      i += 1; // unbounded or optional repetition: no copies
    } else {
      estimate.atom(1);
      i += 1;
    }
  }
  return { size: estimate.finish(), largestBound, largestBoundText };
}

/** `m}`, `m,}`, `,n}`, `m,n}` (or `...\}`) from `start`; null when the text there is not a bound. */
function readBound(pattern: string, start: number): { largest: number; end: number } | null {
  let i = start;
  const number = (): string => {
    const from = i;
    while (i < pattern.length && pattern[i]! >= '0' && pattern[i]! <= '9') i++;
    return pattern.slice(from, i);
  };
  const skipBlanks = () => {
    while (pattern[i] === ' ') i++;
  };
  skipBlanks();
  const low = number();
  skipBlanks();
  let high = '';
  if (pattern[i] === ',') {
    i++;
    skipBlanks();
    high = number();
    skipBlanks();
  }
  if (pattern[i] === '\\') i++;
  if (pattern[i] !== '}' || (low === '' && high === '')) return null;
  const value = (digits: string) => (digits === '' ? 0 : digits.length > 9 ? Infinity : Number(digits));
  return { largest: Math.max(value(low), value(high)), end: i + 1 };
}

/**
 * Refuses regexes that would make the engine build a huge automaton before reading a byte (GNU grep and
 * find expand `a{32767}{32767}` into about a billion states: 3 GB in seconds; `(a|b|...){1000}` is as
 * many states as branches times the count). Counted repetitions are `{m}`, `{m,}`, `{,n}`, `{m,n}` (ERE,
 * PCRE, Rust regex) and `\{m,n\}` (BRE); each bound must be at most maxRepetitionCount, the product of
 * every repetition's largest bound at most maxRepetitionProduct (whether nested or not: cheap and safe),
 * and the estimated automaton size (alternation widths and Unicode classes counted, see estimateSize) at
 * most maxRepetitionProduct too. Returns the reason, or null when the pattern is acceptable.
 */
export function regexLimitProblem(pattern: string, what: string): string | null {
  const limits = SANDBOX_LIMITS;
  if (pattern.length > limits.maxPatternChars) {
    return `${what} is longer than ${limits.maxPatternChars} characters; refused (limit exceeded)`;
  }
  const estimate = estimateSize(pattern);
  if (estimate.largestBound > limits.maxRepetitionCount) {
    return `${what} repeats ${estimate.largestBoundText}: repetition counts are limited to ${limits.maxRepetitionCount}; refused (limit exceeded)`;
  }
  let product = 1;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c !== '{' && !(c === '\\' && pattern[i + 1] === '{')) continue;
    const bound = readBound(pattern, c === '{' ? i + 1 : i + 2);
    if (bound === null) continue;
    product *= Math.max(1, bound.largest);
    if (product > limits.maxRepetitionProduct) {
      return `${what}'s counted repetitions multiply to more than ${limits.maxRepetitionProduct}; refused (limit exceeded)`;
    }
    i = bound.end - 1;
  }
  if (estimate.size > limits.maxRepetitionProduct) {
    return `${what} would compile to about ${estimate.size} states (alternatives and classes times their repetition counts), more than ${limits.maxRepetitionProduct}; refused (limit exceeded)`;
  }
  return null;
}
