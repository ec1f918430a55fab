import { promises as fs, type Dirent } from 'node:fs';
import path from 'node:path';
import type { PatchDroppedFile } from '../../../schemas/downstream/run-record';
import { isGitRefusedComponent } from '../../sandbox/paths';
import { WorktreeError } from '../../worktrees/errors';
import { git, privateGitDir } from '../../worktrees/git';
import { PatchSections } from './patch-sections';

/** Local git commands on one checkout. */
const GIT_TIMEOUT_MS = 120_000;

/**
 * Largest patch kept (UTF-8 bytes). A fix is a few KiB (CodeGrep §4.1); the cap is there so an agent that
 * writes tens of MiB still leaves a record (and a harness input) of bounded size, below git.ts's 64 MiB
 * output cap, instead of losing its whole patch.
 */
export const MAX_PATCH_BYTES = 32 * 1024 * 1024;

export interface WorkspacePatch {
  /** The kept files' parts of the diff, in git's path order ('' when nothing was changed or kept). */
  patch: string;
  /** Changed files left out, in path order: over the size cap, or under a name git refuses. */
  dropped: PatchDroppedFile[];
}

export interface WorkspacePatchOptions {
  signal?: AbortSignal;
  /** Defaults to MAX_PATCH_BYTES; tests use small ones. */
  maxPatchBytes?: number;
}

/**
 * Every entry below the checkout's root whose name git refuses as `.git` (isGitRefusedComponent: `.git` in
 * any case, `.git `, `.git.`, `git~1`, NTFS streams, HFS look-alikes; any type), the root's own `.git`
 * excepted. Symlinked directories are not entered.
 */
export async function nestedGitEntries(checkout: string): Promise<string[]> {
  const found: string[] = [];
  const walk = async (dir: string, atRoot: boolean): Promise<void> => {
    let entries: Dirent[];
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const full = path.join(dir, entry.name);
      if (atRoot && entry.name === '.git') continue;
      if (isGitRefusedComponent(entry.name)) {
        found.push(full);
        continue;
      }
      if (entry.isDirectory()) await walk(full, false);
    }
  };
  await walk(checkout, true);
  return found.sort();
}

/** Bytes on disk under `entry` (links not followed). */
async function sizeOnDisk(entry: string): Promise<number> {
  let stat;
  try {
    stat = await fs.lstat(entry);
  } catch {
    return 0;
  }
  if (!stat.isDirectory()) return stat.size;
  let total = 0;
  for (const name of await fs.readdir(entry).catch(() => [] as string[])) total += await sizeOnDisk(path.join(entry, name));
  return total;
}

/** Keeps whole files' parts while they fit the budget, in the order git gives them; names the rest. */
class PatchBudget {
  private readonly kept: Buffer[] = [];
  private keptBytes = 0;
  private current: { path: string; chunks: Buffer[] | null; bytes: number } | null = null;
  readonly dropped: PatchDroppedFile[] = [];

  constructor(private readonly maxBytes: number) {}

  start(filePath: string): void {
    // A type change (file ↔ symlink) is two parts for one path: they stay together.
    if (this.current?.path === filePath) return;
    this.finish();
    this.current = { path: filePath, chunks: [], bytes: 0 };
  }

  data(bytes: Buffer): void {
    const current = this.current;
    if (!current) return;
    current.bytes += bytes.length;
    if (current.chunks === null) return;
    if (this.keptBytes + current.bytes > this.maxBytes) current.chunks = null;
    else current.chunks.push(Buffer.from(bytes));
  }

  finish(): void {
    const current = this.current;
    this.current = null;
    if (!current) return;
    if (current.chunks === null) this.dropped.push({ path: current.path, bytes: current.bytes, reason: 'patch-size-cap' });
    else {
      this.kept.push(...current.chunks);
      this.keptBytes += current.bytes;
    }
  }

  patch(): string {
    this.finish();
    return Buffer.concat(this.kept).toString('utf8');
  }
}

/**
 * The agent's change as one patch: every tracked change and every new file that .gitignore does not exclude
 * (`git add -A`), diffed against the base commit (`git diff --cached <base>`). Prefixes are pinned to
 * `a/`/`b/`, `--binary` keeps binary edits appliable, and no external diff driver, textconv or colour can
 * leak in. An untouched checkout gives ''.
 *
 * The checkout's files are agent-written, so git runs hardened (lib/worktrees/git.ts: no fsmonitor, no
 * hooks, no system/global config or attributes) on a private git dir (privateGitDir): its own index and
 * objects, and an info/attributes that overrides every `.gitattributes` the agent wrote, so a
 * `working-tree-encoding=UTF-16`, a `filter=` or `diff=` driver, or an `eol`/`text` line can neither make
 * git throw nor run anything nor change the bytes. The checkout's own index and the shared bare clone are
 * never written. The private index starts as a copy of the checkout's, so unchanged files are not re-read.
 * The price: in a repository whose own committed attributes change bytes on checkout (`eol=crlf`, `ident`,
 * `working-tree-encoding`; on Linux `text=auto` and `eol=lf` do not), a file git re-reads shows those
 * converted bytes as a change, since the patch records exactly the bytes in the checkout.
 *
 * What git cannot take is left out and named in `dropped`, never a reason to lose the rest:
 * - entries under a name git refuses as `.git` (a nested repository, `.git `, `git~1` …; an outside agent
 *   could write them, the built-in editor refuses them) are deleted first: git's verify_path refuses them,
 *   and a nested `.git` makes `git add -A` treat its directory as an embedded repository. The checkout is
 *   throwaway, so nothing of value is lost;
 * - past `maxPatchBytes`, whole files are kept in git's (path) order while they fit, and the others named
 *   with their share of the patch.
 */
export async function collectWorkspacePatch(
  checkout: string,
  baseCommit: string,
  options: WorkspacePatchOptions = {},
): Promise<WorkspacePatch> {
  const dropped: PatchDroppedFile[] = [];
  for (const entry of await nestedGitEntries(checkout)) {
    dropped.push({ path: path.relative(checkout, entry), bytes: await sizeOnDisk(entry), reason: 'name-git-refuses' });
    await fs.rm(entry, { recursive: true, force: true });
  }
  const signal = options.signal ? { signal: options.signal } : {};
  const gitDir = await privateGitDir(checkout, { timeoutMs: GIT_TIMEOUT_MS, ...signal });
  try {
    const opts = { cwd: checkout, timeoutMs: GIT_TIMEOUT_MS, hardened: true, env: gitDir.env, ...signal };
    if (!gitDir.seededIndex) await git(['read-tree', baseCommit], opts);
    try {
      await git(['add', '-A'], opts);
    } catch (error) {
      if (!gitDir.seededIndex || !(error instanceof WorktreeError) || error.code !== 'git-failed') throw error;
      // A copied index git cannot use here (a split index whose shared part stayed behind): start from the tree.
      await git(['read-tree', baseCommit], opts);
      await git(['add', '-A'], opts);
    }
    const budget = new PatchBudget(options.maxPatchBytes ?? MAX_PATCH_BYTES);
    const sections = new PatchSections({ start: (file) => budget.start(file), data: (bytes) => budget.data(bytes) });
    await git(
      [
        '-c',
        'diff.noprefix=false',
        '-c',
        'diff.mnemonicPrefix=false',
        '-c',
        'core.quotePath=true',
        'diff',
        '--cached',
        '--binary',
        '--no-color',
        '--no-ext-diff',
        '--no-textconv',
        '--no-renames',
        '--src-prefix=a/',
        '--dst-prefix=b/',
        baseCommit,
        '--',
      ],
      { ...opts, onStdout: (chunk) => sections.write(chunk) },
    );
    sections.end();
    const patch = budget.patch();
    return { patch, dropped: [...dropped, ...budget.dropped] };
  } finally {
    await gitDir.dispose();
  }
}

/** collectWorkspacePatch's patch alone, for callers that do not record what was dropped. */
export async function workspacePatch(checkout: string, baseCommit: string, signal?: AbortSignal): Promise<string> {
  return (await collectWorkspacePatch(checkout, baseCommit, signal ? { signal } : {})).patch;
}
