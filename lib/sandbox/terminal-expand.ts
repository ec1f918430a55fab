import { promises as fs } from 'node:fs';
import path from 'node:path';
import { isInside } from './paths';
import { TimeSlice } from './time-slice';
import { bracketClass, countWildcards, literal, MAX_WILDCARDS, notSlash, WildcardMatcher, type WildNode } from './wildcard';

/** A bash-style glob word expanding to more paths than this is refused (an argument list is not a listing). */
export const MAX_EXPANSION = 5_000;

/**
 * One path segment of a bash glob as a linear-time matcher (lib/sandbox/wildcard.ts; never a RegExp, whose
 * backtracking a hostile `*` pattern turns into minutes): '*' and '?' never match '/', '[...]' is a class
 * ('!' or '^' negates), '\\' escapes one character, an unclosed '[' is literal. The leading-dot rule is
 * the caller's.
 */
function segmentMatcher(segment: string): WildcardMatcher {
  return new WildcardMatcher(segmentNode(segment));
}

function segmentNode(segment: string): WildNode {
  const items: WildNode[] = [];
  for (let i = 0; i < segment.length; i++) {
    const c = segment[i]!;
    if (c === '\\' && i + 1 < segment.length) items.push({ kind: 'char', test: literal(segment.charCodeAt(++i)) });
    else if (c === '*') {
      // A run of stars is one star: same language, fewer states.
      if (items.at(-1)?.kind !== 'repeat') items.push({ kind: 'repeat', test: notSlash });
    } else if (c === '?') items.push({ kind: 'char', test: notSlash });
    else if (c === '[' && segment.indexOf(']', i + 2) !== -1) {
      const close = segment.indexOf(']', i + 2);
      let body = segment.slice(i + 1, close);
      const negate = body.startsWith('!') || body.startsWith('^');
      if (negate) body = body.slice(1);
      items.push({ kind: 'char', test: bracketClass(body, negate) });
      i = close;
    } else items.push({ kind: 'char', test: literal(segment.charCodeAt(i)) });
  }
  return { kind: 'seq', items };
}

function hasMeta(segment: string): boolean {
  for (let i = 0; i < segment.length; i++) {
    if (segment[i] === '\\') i += 1;
    else if ('*?['.includes(segment[i]!)) return true;
  }
  return false;
}

function unescape(segment: string): string {
  return segment.replace(/\\(.)/gs, '$1');
}

async function insideRoot(root: string, candidate: string): Promise<boolean> {
  try {
    return isInside(root, await fs.realpath(candidate));
  } catch {
    return false;
  }
}

/** Why an expansion stopped: the command's deadline passed, or it matched more than MAX_EXPANSION paths. */
type ExpansionStop = 'deadline' | 'too-many';

/**
 * Expands an unquoted glob word the way bash does (sorted matches, hidden entries only for a leading '.',
 * the word kept literally when nothing matches) but only inside the worktree: a directory is listed only
 * when its realpath is inside the root, and a match whose realpath leaves the root (an outward symlink) is
 * left out, so no name outside the root is ever revealed. Relative words give root-relative paths; an
 * absolute word under the root gives absolute paths; an absolute word elsewhere is not expanded.
 * Returns null when the word stays literal; a string when the expansion is refused (more than
 * MAX_EXPANSION paths, or `deadline`, an epoch-ms time, passed).
 */
export async function expandGlobWord(
  canonicalRoot: string,
  givenRoot: string,
  glob: string,
  deadline = Infinity,
): Promise<string[] | null | { refused: string }> {
  const anchored = anchorWord(canonicalRoot, givenRoot, glob);
  if (!anchored) return null;
  const segments = anchored.rest.split('/').filter((s) => s !== '');
  const wildcards = segments.filter(hasMeta).reduce((sum, segment) => sum + countWildcards(segmentNode(segment)), 0);
  if (wildcards > MAX_WILDCARDS) {
    return {
      refused: `the pattern ${JSON.stringify(unescape(glob).slice(0, 80))} has more than ${MAX_WILDCARDS} '*' wildcards (limit exceeded); quote it or use find -name`,
    };
  }
  // Expansion runs before anything else: the command's deadline bounds it, checked at every entry (a
  // directory of long names against a hostile word is seconds of matching), and the loop yields to the
  // event loop every few milliseconds so other tool calls keep running.
  const slice = new TimeSlice(deadline);
  const tooLong = {
    refused: `expanding ${JSON.stringify(unescape(glob))} took longer than the command's time limit; use find or rg --files instead`,
  };
  let current: string[] = [''];
  for (let k = 0; k < segments.length; k++) {
    const next = await expandSegment(canonicalRoot, current, segments[k]!, k === segments.length - 1, slice);
    if (next === 'deadline') return tooLong;
    if (next === 'too-many') {
      return {
        refused: `the pattern ${JSON.stringify(unescape(glob))} expands to more than ${MAX_EXPANSION} paths; use find or rg --files instead`,
      };
    }
    current = next;
    if (current.length === 0) return null;
  }
  const kept = await keepInsideRoot(canonicalRoot, current, anchored.prefix, slice);
  if (kept === 'deadline') return tooLong;
  return kept.length ? kept.sort() : null;
}

/**
 * The word split into the prefix its matches keep (an absolute word: the root as it was written, then '/')
 * and the part matched under the canonical root; null for an absolute word that names nothing under the root.
 */
function anchorWord(canonicalRoot: string, givenRoot: string, glob: string): { prefix: string; rest: string } | null {
  if (!glob.startsWith('/')) return { prefix: '', rest: glob };
  const unescaped = unescape(glob);
  const root = [canonicalRoot, path.resolve(givenRoot)].find((r) => isInside(r, unescaped) && unescaped !== r);
  if (!root) return null;
  return { prefix: `${root}/`, rest: glob.slice(root.length + 1) };
}

/**
 * The root-relative paths one more segment reaches from each of `current`: a literal segment is joined
 * as it is; a wildcard one lists each directory inside the root and keeps the sorted entries it matches
 * (only directories, unless it is the word's last segment).
 */
async function expandSegment(
  canonicalRoot: string,
  current: string[],
  segment: string,
  last: boolean,
  slice: TimeSlice,
): Promise<string[] | ExpansionStop> {
  const next: string[] = [];
  if (!hasMeta(segment)) {
    const name = unescape(segment);
    for (const rel of current) next.push(rel ? `${rel}/${name}` : name);
    return next;
  }
  const matcher = segmentMatcher(segment);
  const dotOk = unescape(segment).startsWith('.');
  for (const rel of current) {
    if (!(await slice.pass())) return 'deadline';
    const dir = path.join(canonicalRoot, rel);
    if (!(await insideRoot(canonicalRoot, dir))) continue;
    let entries: string[];
    try {
      entries = await fs.readdir(dir);
    } catch {
      continue;
    }
    for (const entry of entries.sort()) {
      if (!(await slice.pass())) return 'deadline';
      if (entry.startsWith('.') && !dotOk) continue;
      if (!matcher.matches(entry)) continue;
      const candidate = rel ? `${rel}/${entry}` : entry;
      if (!last && !(await isDirectory(path.join(canonicalRoot, candidate)))) continue;
      next.push(candidate);
      if (next.length > MAX_EXPANSION) return 'too-many';
    }
  }
  return next;
}

async function isDirectory(candidate: string): Promise<boolean> {
  try {
    return (await fs.stat(candidate)).isDirectory();
  } catch {
    return false;
  }
}

/** The matches that exist and whose realpath is inside the root, with the word's prefix. */
async function keepInsideRoot(canonicalRoot: string, matches: string[], prefix: string, slice: TimeSlice): Promise<string[] | 'deadline'> {
  const kept: string[] = [];
  for (const rel of matches) {
    if (!(await slice.pass())) return 'deadline';
    try {
      await fs.lstat(path.join(canonicalRoot, rel));
    } catch {
      continue;
    }
    if (await insideRoot(canonicalRoot, path.join(canonicalRoot, rel))) kept.push(`${prefix}${rel}`);
  }
  return kept;
}
