import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoLockPath } from './layout';
import { processAlive, withRepoLock, type LockOptions } from './repo-lock';
import { repoFromSlug } from './repo-name';

/**
 * Holds: "this worktree is in use, do not prune it". An activity that works in worktrees (materializing them,
 * an environment server's episodes, an evaluation shard) holds them for as long as it runs; the disk budget
 * (lib/worktrees/budget.ts) never removes a held worktree.
 *
 *     <worktreesDir>/.holds/<owner>__<name>/<commit>/<holder>.json    { pid, hostname, createdAt }
 *
 * A hold is written and a worktree is pruned under the repository's lock (lib/worktrees/repo-lock.ts), so a
 * prune either sees the hold or has finished before it was taken (the holder then finds no worktree and
 * remakes it). A hold whose process is gone (same host, pid not alive) is dead and ignored; one from another
 * host counts until HOLD_STALE_MS after its last refresh, since its process cannot be checked from here.
 */
export const HOLDS_DIR = '.holds';
export const HOLD_STALE_MS = 6 * 60 * 60 * 1000;

export interface WorktreeHold {
  /** The worktrees held. */
  paths: string[];
  /** Touches the hold files (keeps a hold from another host from going stale). */
  refresh(): Promise<void>;
  /** Removes the hold files; idempotent. */
  release(): Promise<void>;
}

interface HoldBody {
  pid: number;
  hostname: string;
  createdAt: string;
}

/** The folder of a worktree's holds: `<worktreesDir>/.holds/<slug>/<commit>`, from `<worktreesDir>/<slug>/<commit>`. */
export function holdDir(worktree: string): string {
  const wt = path.resolve(worktree);
  const commit = path.basename(wt);
  const slug = path.basename(path.dirname(wt));
  return path.join(path.dirname(path.dirname(wt)), HOLDS_DIR, slug, commit);
}

/**
 * Holds every worktree in `worktrees` (paths `<worktreesDir>/<owner>__<name>/<commit>`) until `release`.
 * `cacheDir` names the repository locks the hold is written under; without it, each worktree's own `.git`
 * file says (its bare repository `<cacheDir>/<owner>__<name>.git`). A worktree that is gone is held all the
 * same (whoever remakes it finds the hold).
 */
export async function holdWorktrees(
  worktrees: readonly string[],
  opts: { cacheDir?: string; lock?: LockOptions } = {},
): Promise<WorktreeHold> {
  const holder = `${os.hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`;
  const body: HoldBody = { pid: process.pid, hostname: os.hostname(), createdAt: new Date().toISOString() };
  const paths = [...new Set(worktrees.map((w) => path.resolve(w)))];
  const files: string[] = [];
  for (const wt of paths) {
    const file = path.join(holdDir(wt), `${holder}.json`);
    const write = async () => {
      await fs.mkdir(path.dirname(file), { recursive: true });
      await fs.writeFile(file, JSON.stringify(body) + '\n');
    };
    const repo = repoFromSlug(path.basename(path.dirname(wt)));
    const cacheDir = opts.cacheDir ?? (await cacheDirOf(wt));
    if (repo && cacheDir) await withRepoLock(repoLockPath(cacheDir, repo), write, opts.lock ?? {});
    else await write();
    files.push(file);
  }
  let released = false;
  return {
    paths,
    async refresh() {
      const now = new Date();
      await Promise.all(files.map((f) => fs.utimes(f, now, now).catch(() => undefined)));
    },
    async release() {
      if (released) return;
      released = true;
      await Promise.all(files.map((f) => fs.rm(f, { force: true })));
      // Empty hold folders go too, up to `.holds` (rmdir fails on a folder another holder still uses: fine).
      for (const f of files) {
        const commitDir = path.dirname(f);
        await fs.rmdir(commitDir).catch(() => undefined);
        await fs.rmdir(path.dirname(commitDir)).catch(() => undefined);
        await fs.rmdir(path.dirname(path.dirname(commitDir))).catch(() => undefined);
      }
    },
  };
}

/**
 * Whether a live hold names `worktree`. Dead holds (a process of this host that is gone, or a hold from
 * another host not refreshed for HOLD_STALE_MS) are removed on the way. Call under the repository's lock.
 */
export async function isHeld(worktree: string, now = Date.now()): Promise<boolean> {
  const dir = holdDir(worktree);
  let live = false;
  for (const name of await fs.readdir(dir).catch(() => [] as string[])) {
    const file = path.join(dir, name);
    const [text, st] = await Promise.all([fs.readFile(file, 'utf8').catch(() => ''), fs.stat(file).catch(() => undefined)]);
    if (st === undefined) continue;
    let body: Partial<HoldBody> = {};
    try {
      body = JSON.parse(text) as Partial<HoldBody>;
    } catch {
      // a hold being written: counts as live until it is old
    }
    const alive =
      body.hostname === os.hostname() && typeof body.pid === 'number' ? processAlive(body.pid) : now - st.mtimeMs < HOLD_STALE_MS;
    if (alive) live = true;
    else await fs.rm(file, { force: true });
  }
  return live;
}

/** The cache folder of a worktree's bare repository, from its `.git` file (`gitdir: <cacheDir>/<slug>.git/worktrees/<id>`). */
async function cacheDirOf(wt: string): Promise<string | undefined> {
  const dotGit = await fs.readFile(path.join(wt, '.git'), 'utf8').catch(() => undefined);
  const gitdir = dotGit?.match(/^gitdir:\s*(.+)$/m)?.[1]?.trim();
  if (!gitdir) return undefined;
  const admin = path.resolve(wt, gitdir);
  return path.basename(path.dirname(admin)) === 'worktrees' ? path.dirname(path.dirname(path.dirname(admin))) : undefined;
}
