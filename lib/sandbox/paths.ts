import { promises as fs } from 'node:fs';
import path from 'node:path';
import { SANDBOX_LIMITS } from './limits';

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
  let lexical: string;
  if (path.isAbsolute(requested)) {
    const normalized = path.normalize(requested);
    const givenRoot = path.resolve(rootPath);
    if (isInside(root.root, normalized)) lexical = normalized;
    else if (isInside(givenRoot, normalized)) lexical = path.join(root.root, path.relative(givenRoot, normalized));
    else {
      return {
        ok: false,
        message: `path ${show(userPath)} is outside the repository root; refused (use a path relative to the repository root)`,
      };
    }
  } else {
    lexical = path.resolve(root.root, requested);
    if (!isInside(root.root, lexical)) {
      return { ok: false, message: `path ${show(userPath)} leaves the repository root; refused` };
    }
  }

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
