import { promises as fs } from 'node:fs';
import path from 'node:path';
import { SANDBOX_LIMITS } from './limits';
import { displayPath } from './tool-result';

export type PathKind = 'file' | 'directory' | 'other';

export type GuardedPath =
  | {
      ok: true;
      /** The root's realpath: run subprocesses here so relative operands and output paths are repo-relative. */
      root: string;
      /** Canonical absolute path (every symlink resolved), always inside the canonical root. */
      absolute: string;
      /** The same path relative to the canonical root; '.' for the root itself. */
      relative: string;
      kind: PathKind;
      size: number;
    }
  | { ok: false; message: string };

export type CanonicalRoot = { ok: true; root: string } | { ok: false; message: string };

/** The root's realpath; a root that is missing or not a directory is a clear error, not an exception. */
export async function canonicalRoot(root: string): Promise<CanonicalRoot> {
  if (typeof root !== 'string' || root.length === 0 || root.includes('\0')) {
    return { ok: false, message: `worktree root ${JSON.stringify(root)} is not a usable path` };
  }
  try {
    const real = await fs.realpath(path.resolve(root));
    const stat = await fs.stat(real);
    if (!stat.isDirectory()) return { ok: false, message: `worktree root ${root} is not a directory` };
    return { ok: true, root: real };
  } catch (error) {
    return { ok: false, message: `worktree root ${root} is not accessible (${errorCode(error)})` };
  }
}

/** A path component git treats as its control directory (git itself refuses `.git` in any letter case). */
export function isGitComponent(name: string): boolean {
  return name.toLowerCase() === '.git';
}

/** True when any component of the root-relative `relative` is a `.git`. */
export function hasGitComponent(relative: string): boolean {
  return relative.split(/[\\/]/).some(isGitComponent);
}

export function isInside(root: string, candidate: string): boolean {
  return candidate === root || candidate.startsWith(root.endsWith(path.sep) ? root : root + path.sep);
}

function errorCode(error: unknown): string {
  return (error as NodeJS.ErrnoException | undefined)?.code ?? String(error);
}

function show(userPath: string): string {
  return JSON.stringify(userPath.length > 200 ? `${userPath.slice(0, 200)}…` : userPath);
}

function outwardRefusal(userPath: string): { ok: false; message: string } {
  return { ok: false, message: `path ${show(userPath)} resolves (through a symlink) to outside the repository root; refused` };
}

/** Most symlinks followed while resolving one path by hand (Linux's own limit is 40). */
const MAX_SYMLINK_HOPS = 40;

/**
 * Resolves `lexical` (inside the canonical `root`) one component at a time, following symlinks by reading
 * them, and says whether any link leads outside the root ('outside'), whether or not what it points at
 * exists, or into a `.git` ('git'). Used when realpath failed, so a dangling outward link is refused exactly
 * like an outward link whose target exists, and a link into `.git` answers the same whatever `.git` holds.
 * Reads only link texts inside the root; never touches anything outside it.
 */
export async function linkDestination(root: string, lexical: string): Promise<'outside' | 'git' | null> {
  const pending = path
    .relative(root, lexical)
    .split(path.sep)
    .filter((c) => c !== '' && c !== '.');
  let current = root;
  let hops = 0;
  while (pending.length > 0) {
    const component = pending.shift()!;
    const next = path.resolve(current, component);
    if (!isInside(root, next)) return 'outside';
    if (hasGitComponent(path.relative(root, next))) return 'git';
    let stat;
    try {
      stat = await fs.lstat(next);
    } catch {
      return null;
    }
    if (!stat.isSymbolicLink()) {
      current = next;
      continue;
    }
    if (++hops > MAX_SYMLINK_HOPS) return null;
    let target: string;
    try {
      target = await fs.readlink(next);
    } catch {
      return null;
    }
    const resolved = path.resolve(current, target);
    if (!isInside(root, resolved)) return 'outside';
    pending.unshift(
      ...path
        .relative(root, resolved)
        .split(path.sep)
        .filter((c) => c !== '' && c !== '.'),
    );
    current = root;
  }
  return null;
}

/** True when a symlink on the way leads outside the root (see linkDestination). */
export async function escapesThroughSymlink(root: string, lexical: string): Promise<boolean> {
  return (await linkDestination(root, lexical)) === 'outside';
}

export interface GuardOptions {
  /**
   * How a path into git's control data (a `.git` component, written or reached through a symlink) is
   * answered: 'refuse' (default) says it is inside .git; 'missing' answers exactly as a path that does not
   * exist (the retrieval tools: their sandbox holds an empty .git, and glob never lists it). Either way the
   * answer is decided before anything under `.git` is touched, so it never depends on what `.git` holds.
   */
  gitControlData?: 'refuse' | 'missing';
}

/**
 * The requested path as an absolute path under the canonical root, before the filesystem is touched:
 * an absolute path must name something inside the root, given as its realpath or as the path the caller
 * passed (`rootPath`); a relative one must not climb above the root. `userPath` is the path as written,
 * for the message.
 */
function lexicalPath(
  rootPath: string,
  root: string,
  requested: string,
  userPath: string,
): { ok: true; lexical: string } | { ok: false; message: string } {
  if (path.isAbsolute(requested)) {
    const normalized = path.normalize(requested);
    const givenRoot = path.resolve(rootPath);
    if (isInside(root, normalized)) return { ok: true, lexical: normalized };
    if (isInside(givenRoot, normalized)) return { ok: true, lexical: path.join(root, path.relative(givenRoot, normalized)) };
    return {
      ok: false,
      message: `path ${show(userPath)} is outside the repository root; refused (use a path relative to the repository root)`,
    };
  }
  const lexical = path.resolve(root, requested);
  if (!isInside(root, lexical)) return { ok: false, message: `path ${show(userPath)} leaves the repository root; refused` };
  return { ok: true, lexical };
}

function missing(userPath: string): { ok: false; message: string } {
  return { ok: false, message: `no such file or directory: ${show(userPath)}` };
}

/**
 * Resolves a path the model gave against the worktree root and refuses anything that leaves it.
 *
 * - Relative paths are resolved against the root; '' and '.' mean the root itself.
 * - Absolute paths are accepted only when they name something inside the root (given either as the root
 *   path the caller passed or as its realpath), so a model echoing a path from an earlier observation
 *   works; every other absolute path (/etc/passwd, /proc/self/environ) is refused without being touched.
 * - `..` that climbs above the root is refused before the filesystem is touched.
 * - The result is canonicalised with realpath, so a symlink inside the root that points outside (or a chain
 *   of them) is refused, and a symlink loop (ELOOP) is reported as such. The target of an outward symlink
 *   is never echoed.
 * - NUL bytes, over-long paths and paths that do not exist are refused with a message naming the path.
 *
 * Never throws. The root is canonicalised here too (`rootPath` may itself contain symlinks).
 */
export async function guardPath(rootPath: string, userPath: string, options: GuardOptions = {}): Promise<GuardedPath> {
  if (typeof userPath !== 'string') return { ok: false, message: 'path must be a string' };
  if (userPath.includes('\0')) return { ok: false, message: `path ${show(userPath)} contains a NUL byte; refused` };
  if (userPath.length > SANDBOX_LIMITS.maxPathChars) {
    return { ok: false, message: `path is longer than ${SANDBOX_LIMITS.maxPathChars} characters; refused` };
  }
  const root = await canonicalRoot(rootPath);
  if (!root.ok) return root;

  const requested = userPath.trim() === '' ? '.' : userPath;
  const joined = lexicalPath(rootPath, root.root, requested, userPath);
  if (!joined.ok) return joined;
  const lexical = joined.lexical;

  // A worktree's `.git` file names the bare clone's directory (outside the root); a `.git` directory holds
  // config and hooks. Neither is repository content: no tool shows them.
  const gitAnswer = () =>
    options.gitControlData === 'missing'
      ? missing(userPath)
      : { ok: false as const, message: `path ${show(userPath)} is inside .git; git's control data is not shown` };
  if (hasGitComponent(path.relative(root.root, lexical))) return gitAnswer();

  let real: string;
  try {
    real = await fs.realpath(lexical);
  } catch (error) {
    const code = errorCode(error);
    // A link that points out answers the same whether or not its target exists: no existence oracle.
    const destination = await linkDestination(root.root, lexical);
    if (destination === 'outside') return outwardRefusal(userPath);
    if (destination === 'git') return gitAnswer();

    if (code === 'ENOENT') return missing(userPath);
    if (code === 'ELOOP') return { ok: false, message: `path ${show(userPath)} is a symlink loop; refused` };
    if (code === 'ENOTDIR') return { ok: false, message: `path ${show(userPath)}: a component is not a directory` };
    if (code === 'EACCES') return { ok: false, message: `path ${show(userPath)}: permission denied` };
    if (code === 'ENAMETOOLONG') return { ok: false, message: `path ${show(userPath)} is too long; refused` };
    return { ok: false, message: `path ${show(userPath)} cannot be resolved (${code})` };
  }
  if (!isInside(root.root, real)) return outwardRefusal(userPath);
  if (hasGitComponent(path.relative(root.root, real))) return gitAnswer();
  try {
    const stat = await fs.stat(real);
    const kind: PathKind = stat.isFile() ? 'file' : stat.isDirectory() ? 'directory' : 'other';
    return { ok: true, root: root.root, absolute: real, relative: path.relative(root.root, real) || '.', kind, size: stat.size };
  } catch (error) {
    return { ok: false, message: `path ${show(userPath)} cannot be inspected (${errorCode(error)})` };
  }
}

/** A relative path made safe to pass as a program operand: never starts with '-' (so it can never be a flag). */
export function asOperand(relative: string): string {
  return relative.startsWith('-') ? `./${relative}` : relative;
}

/**
 * Code points HFS+ ignores when it compares names, so `.g\u200Cit` is the same directory as `.git` there.
 * git's utf8.c `next_hfs_char` skips exactly these (zero-width joiners, direction marks and overrides, the
 * deprecated shaping controls, the BOM).
 */
const HFS_IGNORABLE = /[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]/gu;

/**
 * True for a path component that git's `verify_path` refuses as its control directory on some filesystem
 * (git's read-cache.c `verify_dotfile`, path.c `is_ntfs_dotgit`, utf8.c `is_hfs_dotgit`), so a file under it
 * can never be added, diffed or checked out:
 * - `.git` in any letter case (`verify_dotfile`);
 * - NTFS: `.git` or its 8.3 short name `git~1`, followed only by dots and spaces (Windows drops those), or
 *   by an alternate data stream (`.git::$INDEX_ALLOCATION`, `.git:x`);
 * - HFS+: any of the above with the code points HFS+ ignores mixed in (`.G\u200DIT`).
 */
export function isGitRefusedComponent(name: string): boolean {
  const folded = name.replace(HFS_IGNORABLE, '').toLowerCase();
  const rest = folded.startsWith('.git') ? folded.slice(4) : folded.startsWith('git~1') ? folded.slice(5) : null;
  if (rest === null) return false;
  const stream = rest.indexOf(':');
  return /^[. ]*$/.test(stream === -1 ? rest : rest.slice(0, stream));
}

/** The first character git or the sandbox never accepts in a written path (NUL, and `\`, a separator on NTFS), or null. */
function forbiddenPathCharacter(userPath: string): string | null {
  if (userPath.includes('\0')) return 'a NUL byte';
  if (userPath.includes('\\')) return 'a backslash (\\)';
  return null;
}

export type WriteExpectation = 'existing-file' | 'new-file';

export type WriteTarget =
  | {
      ok: true;
      /** The canonical root. */
      root: string;
      /** The target's absolute path under the canonical root (never resolved through a link: none is on the way). */
      absolute: string;
      /** The same, relative to the root. */
      relative: string;
      /** The deepest existing directory on the way (the root, or a directory under it); the rest is to be made. */
      existingParent: string;
      /** For an existing file: its permission bits and size. */
      mode: number;
      size: number;
    }
  | {
      ok: false;
      /** `exists`: a `new-file` target is already there; `missing`: an `existing-file` target is not. */
      reason: 'exists' | 'missing' | 'refused';
      message: string;
    };

/**
 * Where a write to `userPath` would land, checked component by component before anything is written. The
 * write-side twin of guardPath, for a path that may not exist yet:
 * - no NUL or backslash; the path (absolute only when under the root) stays inside the root lexically;
 * - no component is a name git refuses (isGitRefusedComponent): not the root's `.git`, not a nested one,
 *   not `.git ` or `git~1`, so no write can make a repository, a config with core.fsmonitor or a hook, and
 *   nothing is written that git would refuse to put in a patch;
 * - every existing component is checked with lstat and none may be a symlink, wherever it points (at
 *   `.git`, outside, or inside), so what is written is exactly the path that was checked; an existing
 *   intermediate component must be a directory; the missing rest (a not-yet-existing leaf and parents) is
 *   allowed;
 * - `existing-file`: the target is a regular file with no other hard link (git never makes hard links in a
 *   checkout, so a second link can only point at data outside this path's control); `new-file`: nothing
 *   (not even a dangling link) is there.
 * This is a check at one moment: a concurrent outside process can still change the tree afterwards, which
 * is why the editor does the write itself inside the namespace (lib/sandbox/namespace.ts). Never throws.
 */
export async function guardWritePath(rootPath: string, userPath: string, expect: WriteExpectation): Promise<WriteTarget> {
  const refuse = (message: string, reason: 'exists' | 'missing' | 'refused' = 'refused'): WriteTarget => ({ ok: false, reason, message });
  if (typeof userPath !== 'string' || userPath.trim() === '') return refuse('path must name a file');
  const bad = forbiddenPathCharacter(userPath);
  if (bad) return refuse(`path ${show(userPath)} contains ${bad}; refused`);
  if (userPath.length > SANDBOX_LIMITS.maxPathChars)
    return refuse(`path is longer than ${SANDBOX_LIMITS.maxPathChars} characters; refused`);
  const root = await canonicalRoot(rootPath);
  if (!root.ok) return refuse(root.message);
  const joined = lexicalPath(rootPath, root.root, userPath, userPath);
  if (!joined.ok) return refuse(joined.message);
  const lexical = joined.lexical;
  if (lexical === root.root) return refuse('the path must name a file, not the repository root');
  const relative = path.relative(root.root, lexical);
  const components = relative.split(path.sep);
  const gitName = components.find(isGitRefusedComponent);
  if (gitName !== undefined) {
    return refuse(
      `path ${show(userPath)} is inside .git; refused (${show(gitName)} is a name git treats as its control directory; git's control data is never edited, and git cannot take such a path into a patch)`,
    );
  }
  let current = root.root;
  for (let k = 0; k < components.length; k++) {
    const parent = current;
    current = path.join(current, components[k]!);
    const shown = components.slice(0, k + 1).join('/');
    const last = k === components.length - 1;
    let stat;
    try {
      stat = await fs.lstat(current);
    } catch (error) {
      const code = errorCode(error);
      if (code !== 'ENOENT') return refuse(`cannot inspect ${show(shown)} (${code})`);
      if (expect === 'existing-file') return refuse(`no such file or directory: ${show(userPath)}`, 'missing');
      return { ok: true, root: root.root, absolute: lexical, relative, existingParent: parent, mode: 0o644, size: 0 };
    }
    if (stat.isSymbolicLink()) {
      return refuse(
        `${displayPath(shown)} is a symlink; the editor never writes through symlinks (edit the file it stands for by its own path)`,
      );
    }
    if (!last && !stat.isDirectory()) return refuse(`${displayPath(shown)} is not a directory`);
    if (last) {
      if (expect === 'new-file') return refuse(`${displayPath(relative)} already exists`, 'exists');
      if (stat.isDirectory()) return refuse(`${displayPath(relative)} is a directory; only files can be edited`);
      if (!stat.isFile()) return refuse(`${displayPath(relative)} is not a regular file`);
      if (stat.nlink > 1) return refuse(`${displayPath(relative)} has other hard links; refused (editing it would change files elsewhere)`);
      return { ok: true, root: root.root, absolute: lexical, relative, existingParent: parent, mode: stat.mode & 0o7777, size: stat.size };
    }
  }
  return refuse(`path ${show(userPath)} cannot be resolved`);
}
