/**
 * Repository-relative path normalisation, decided once for the whole project.
 *
 * Every path that is compared against another (predictions vs. gold, mined views vs. patch files, BM25 hits)
 * goes through `normalizeRepoPath`; paths read from a unified diff go through `patchPathToRepoPath` first.
 * CodeGrep App. E ("Scoring"): "We use forward-slash paths on both sides; any residual path-separator
 * differences are normalized before set-intersection."
 *
 * Rules of `normalizeRepoPath`, in order:
 *   1. surrounding whitespace is trimmed;
 *   2. backslashes become `/`;
 *   3. runs of `/` collapse to one;
 *   4. `.` segments are removed anywhere (`./a/./b` → `a/b`), and `x/..` pairs cancel (`a/b/../c` → `a/c`);
 *      a `..` that would climb above the start is kept (`../a` stays `../a`): such a path is outside the
 *      repository and must never silently become a path inside it;
 *   5. a trailing `/` is dropped;
 *   6. a leading `/` is kept: an absolute path is not repository-relative, and guessing which prefix to cut is
 *      the caller's job (pass `root` to strip a known worktree prefix).
 * It never strips `a/` or `b/`: outside a diff header those are ordinary directory names (a repository may
 * well have a top-level `a/`). Only `patchPathToRepoPath` strips them, because only a diff header is known to
 * carry them.
 */

export interface NormalizeOptions {
  /** An absolute (or otherwise known) prefix to strip, e.g. the worktree root the agent saw. */
  root?: string;
}

/** Normalises one repository-relative path (see module comment). Returns '' for an empty or all-dot input. */
export function normalizeRepoPath(raw: string, opts: NormalizeOptions = {}): string {
  let p = raw.trim().replace(/\\/g, '/');
  if (opts.root !== undefined) {
    const root = collapse(opts.root.trim().replace(/\\/g, '/')).replace(/\/+$/, '');
    const collapsed = collapse(p);
    if (root !== '' && (collapsed === root || collapsed.startsWith(root + '/'))) {
      p = collapsed.slice(root.length + 1);
    }
  }
  const absolute = p.startsWith('/');
  const out: string[] = [];
  for (const segment of p.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..' && out.length > 0 && out[out.length - 1] !== '..') {
      out.pop();
      continue;
    }
    out.push(segment);
  }
  const joined = out.join('/');
  return absolute ? '/' + joined : joined;
}

function collapse(p: string): string {
  return p.replace(/\/{2,}/g, '/');
}

/** The marker a unified diff uses for the missing side of a new or deleted file. */
export const DEV_NULL = '/dev/null';

/**
 * A path from a unified-diff header (`--- a/x.py`, `+++ b/x.py`, `diff --git a/x.py b/x.py`) as a
 * repository-relative path: one leading `a/` or `b/` is stripped (git's default prefixes), then
 * `normalizeRepoPath` applies. `/dev/null` (file created or deleted) returns null. A header path without a
 * prefix (`git diff --no-prefix`) is kept as is.
 */
export function patchPathToRepoPath(raw: string): string | null {
  const trimmed = raw.trim();
  if (trimmed === DEV_NULL) return null;
  const withoutPrefix = /^[ab]\//.test(trimmed) ? trimmed.slice(2) : trimmed;
  return normalizeRepoPath(withoutPrefix);
}

/**
 * Normalises every path and drops empty results and repeats, keeping the first occurrence, so a ranked list
 * stays ranked.
 */
export function dedupePaths(paths: Iterable<string>, opts: NormalizeOptions = {}): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const raw of paths) {
    const p = normalizeRepoPath(raw, opts);
    if (p === '' || seen.has(p)) continue;
    seen.add(p);
    out.push(p);
  }
  return out;
}

/**
 * Entity ids name a class or function inside a file: `file.py:Class`, `file.py:Class.method`,
 * `file.py:func` (CodeScout §3.1; LocAgent's format). The file part (before the LAST `:`; symbol names never
 * contain one) is normalised with `normalizeRepoPath`; the symbol part is trimmed and otherwise kept.
 * An id without `:` is a bare file and is normalised as a path. Returns '' when the file part is empty.
 */
export function normalizeEntityId(raw: string, opts: NormalizeOptions = {}): string {
  const colon = raw.lastIndexOf(':');
  if (colon < 0) return normalizeRepoPath(raw, opts);
  const file = normalizeRepoPath(raw.slice(0, colon), opts);
  const symbol = raw.slice(colon + 1).trim();
  if (file === '') return '';
  return symbol === '' ? file : `${file}:${symbol}`;
}

/** `normalizeEntityId` over a list, dropping empty results and repeats, first occurrence kept. */
export function dedupeEntityIds(ids: Iterable<string>, opts: NormalizeOptions = {}): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const raw of ids) {
    const id = normalizeEntityId(raw, opts);
    if (id === '' || seen.has(id)) continue;
    seen.add(id);
    out.push(id);
  }
  return out;
}
