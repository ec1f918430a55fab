import { SANDBOX_LIMITS } from './limits';

/**
 * Refuses regexes whose counted repetitions would make the engine build a huge automaton before reading a
 * byte (GNU grep and find expand `a{32767}{32767}` into about a billion states: 3 GB in seconds). Counted
 * repetitions are `{m}`, `{m,}`, `{,n}`, `{m,n}` (ERE, PCRE, Rust regex) and `\{m,n\}` (BRE); each bound
 * must be at most maxRepetitionCount, and the product of every repetition's largest bound at most
 * maxRepetitionProduct (nesting multiplies, and telling nesting apart is not worth a parser: sequential
 * repetitions are rarely large). Returns the reason, or null when the pattern is acceptable.
 */
export function regexLimitProblem(pattern: string, what: string): string | null {
  const limits = SANDBOX_LIMITS;
  if (pattern.length > limits.maxPatternChars) {
    return `${what} is longer than ${limits.maxPatternChars} characters; refused (limit exceeded)`;
  }
  let product = 1;
  for (const m of pattern.matchAll(/\\?\{\s*(\d*)\s*(,\s*(\d*)\s*)?\\?\}/g)) {
    if (m[1] === '' && (m[3] ?? '') === '') continue; // '{}' or '{,}' is literal text
    const bounds = [m[1], m[3]].filter((b): b is string => b !== undefined && b !== '').map((b) => (b.length > 9 ? Infinity : Number(b)));
    const largest = Math.max(...bounds);
    if (largest > limits.maxRepetitionCount) {
      return `${what} repeats ${m[0]}: repetition counts are limited to ${limits.maxRepetitionCount}; refused (limit exceeded)`;
    }
    product *= Math.max(1, largest);
    if (product > limits.maxRepetitionProduct) {
      return `${what}'s counted repetitions multiply to more than ${limits.maxRepetitionProduct}; refused (limit exceeded)`;
    }
  }
  return null;
}
