import { trimLeadingSlashes, trimTrailingSlashes } from './glob-pattern';
import {
  anyChar,
  bracketClass,
  countWildcards,
  literal,
  MAX_WILDCARDS,
  notSlash,
  WildcardMatcher,
  type CharTest,
  type WildNode,
} from './wildcard';

/**
 * Glob matching with ripgrep's `--glob` semantics (gitignore style), for the GNU grep / find fallback, so
 * both engines answer the same glob the same way:
 * - a pattern with no '/' (other than a trailing one) matches the file name at any depth ('*.py');
 *   one with a '/' is anchored at the repository root ('src/*.py', '/setup.py');
 * - '*' and '?' never cross '/'; '**' spans directories ('src/**', '**' + '/test_*.py');
 * - '[a-z]', '[!x]' / '[^x]' classes; '{py,pyi}' alternatives; '\' escapes one character;
 * - a trailing '/' matches directories only, so it selects no file by itself;
 * - a leading '!' excludes: the file is dropped when the pattern matches it or any directory above it.
 */
export interface CompiledGlob {
  negated: boolean;
  /** True when the pattern selects `relativePath` (for a negated glob: would exclude it). */
  matches(relativePath: string): boolean;
}

export type GlobCompileResult = { ok: true; glob: CompiledGlob } | { ok: false; message: string };

const ANY_DIRS: WildNode = {
  kind: 'optional',
  node: {
    kind: 'seq',
    items: [
      { kind: 'repeat', test: anyChar },
      { kind: 'char', test: literal(0x2f) },
    ],
  },
};

/**
 * The glob as a wildcard-matcher program (lib/sandbox/wildcard.ts: linear time, no RegExp), with ripgrep's
 * meaning: '**' as a whole segment spans directories, any other '*' stays within one.
 */
function translate(body: string, pattern: string): { ok: true; node: WildNode } | { ok: false; message: string } {
  const top: WildNode[] = [];
  let options: WildNode[][] | null = null; // inside '{...}': the alternatives so far
  const out = (): WildNode[] => (options ? options[options.length - 1]! : top);
  const char = (test: CharTest) => out().push({ kind: 'char', test });
  let i = 0;
  while (i < body.length) {
    const c = body[i]!;
    if (c === '\\') {
      if (i + 1 >= body.length) return { ok: false, message: `glob ${JSON.stringify(pattern)} ends with a lone '\\'` };
      char(literal(body.charCodeAt(i + 1)));
      i += 2;
      continue;
    }
    if (c === '*') {
      if (body[i + 1] === '*') {
        const atStart = i === 0 || body[i - 1] === '/';
        const atEnd = i + 2 === body.length || body[i + 2] === '/';
        if (atStart && atEnd) {
          if (i + 2 === body.length) out().push({ kind: 'repeat', test: anyChar });
          else {
            // '**/**/' is '**/': one state group instead of one per repetition.
            if (out().at(-1) !== ANY_DIRS) out().push(ANY_DIRS);
            i += 1; // swallow the '/' after '**'
          }
          i += 2;
          continue;
        }
        out().push({ kind: 'repeat', test: notSlash });
        i += 2;
        continue;
      }
      out().push({ kind: 'repeat', test: notSlash });
      i += 1;
      continue;
    }
    if (c === '?') {
      char(notSlash);
      i += 1;
      continue;
    }
    if (c === '[') {
      let j = i + 1;
      let negate = false;
      if (body[j] === '!' || body[j] === '^') {
        negate = true;
        j += 1;
      }
      const from = j;
      while (j < body.length && (body[j] !== ']' || j === from)) j += 1;
      if (j >= body.length) {
        return { ok: false, message: `glob ${JSON.stringify(pattern)} has an unclosed character class '['` };
      }
      char(bracketClass(body.slice(from, j), negate));
      i = j + 1;
      continue;
    }
    if (c === '{') {
      if (options) return { ok: false, message: `glob ${JSON.stringify(pattern)} nests '{' alternatives, which is not supported` };
      options = [[]];
      i += 1;
      continue;
    }
    if (c === ',' && options) {
      options.push([]);
      i += 1;
      continue;
    }
    if (c === '}' && options) {
      top.push({ kind: 'alt', options: options.map((items) => ({ kind: 'seq', items })) });
      options = null;
      i += 1;
      continue;
    }
    char(literal(body.charCodeAt(i)));
    i += 1;
  }
  if (options) return { ok: false, message: `glob ${JSON.stringify(pattern)} has an unclosed '{' alternative group` };
  return { ok: true, node: { kind: 'seq', items: top } };
}

export function compileGlob(pattern: string): GlobCompileResult {
  if (pattern.length === 0) return { ok: false, message: 'glob is empty' };
  if (pattern.includes('\0')) return { ok: false, message: 'glob contains a NUL byte' };
  let body = pattern;
  const negated = body.startsWith('!');
  if (negated) body = body.slice(1);
  const dirOnly = body.endsWith('/');
  body = trimTrailingSlashes(body);
  let anchored = false;
  if (body.startsWith('/')) {
    anchored = true;
    body = trimLeadingSlashes(body);
  }
  if (body.includes('/')) anchored = true;
  if (body.length === 0) return { ok: false, message: `glob ${JSON.stringify(pattern)} matches nothing` };
  const translated = translate(body, pattern);
  if (!translated.ok) return translated;
  if (countWildcards(translated.node) > MAX_WILDCARDS) {
    return {
      ok: false,
      message: `glob ${JSON.stringify(pattern.slice(0, 80))} has more than ${MAX_WILDCARDS} wildcards and alternatives; refused (limit exceeded)`,
    };
  }
  const matcher = new WildcardMatcher(anchored ? translated.node : { kind: 'seq', items: [ANY_DIRS, translated.node] });
  const test = (text: string) => matcher.matches(text);

  const ancestors = (relativePath: string): string[] => {
    const parts = relativePath.split('/');
    return parts.slice(1).map((_, k) => parts.slice(0, k + 1).join('/'));
  };
  return {
    ok: true,
    glob: {
      negated,
      matches(relativePath: string): boolean {
        if (!negated) return !dirOnly && test(relativePath);
        if (!dirOnly && test(relativePath)) return true;
        return ancestors(relativePath).some((dir) => test(dir));
      },
    },
  };
}

/**
 * A file passes a list of globs the way ripgrep combines several `--glob` flags: the last glob that
 * matches decides; when none matches, the file passes only if every glob is an exclusion.
 */
export function passesGlobs(globs: CompiledGlob[], relativePath: string): boolean {
  for (let k = globs.length - 1; k >= 0; k--) {
    const glob = globs[k]!;
    if (glob.matches(relativePath)) return !glob.negated;
  }
  return globs.every((g) => g.negated);
}

/**
 * Orders repository paths the way a depth-first walk with each directory's entries sorted by name does
 * (ripgrep --sort=path): component by component, so 'a/b' sorts before 'a.txt'. That is plain string order
 * with '/' ranked below every other character: at the first difference, the side with '/' has the shorter
 * component, which sorts first.
 */
export function comparePaths(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let k = 0; k < n; k++) {
    const x = a.charCodeAt(k);
    const y = b.charCodeAt(k);
    if (x !== y) return (x === 0x2f ? -1 : x) - (y === 0x2f ? -1 : y);
  }
  return a.length - b.length;
}

/**
 * A key whose native string order is comparePaths order ('/' becomes NUL, which no path contains), so big
 * lists sort with the engine's fast default comparison instead of a JS comparator.
 */
export function pathSortKey(relativePath: string): string {
  return relativePath.replaceAll('/', '\0');
}

/** Sorts paths in comparePaths order (in place) and returns them. */
export function sortPaths(paths: string[]): string[] {
  const keyed = paths.map(pathSortKey).sort();
  for (let k = 0; k < keyed.length; k++) paths[k] = keyed[k]!.replaceAll('\0', '/');
  return paths;
}
