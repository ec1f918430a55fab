import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { PipelineOutcome } from './subprocess';

/**
 * glob's listings, shared and remembered per (worktree, pattern). A whole-tree `rg --files` costs ~0.2 s of
 * CPU on a 120k-file tree, so 100 concurrent globs are 20 s of CPU: more than 2 cores have within the 10 s
 * timeout (BENCHMARKS.md, tools-load). Concurrent calls with the same pattern share one run, and a finished
 * listing is answered again while the tree is provably unchanged. The answer is exactly what ripgrep would
 * print now: the bytes are ripgrep's own (no matching is redone here), and the proof is a stamp of every
 * directory of the tree (inode, mtime, ctime, to the nanosecond) taken before the listing ran.
 *
 * Why that proof is exact: a listing changes only when a directory's entries change (create, delete,
 * rename, link) or a directory is replaced, and each of those sets the directory's mtime and ctime to the
 * current time (ctime cannot be set back by anyone). A directory that is new hangs in a directory that
 * changed. A directory changed within the clock's granularity of its stamp could keep its times, so a
 * stamp is taken only of a tree whose every directory is older than RACY_MARGIN_MS (as git treats "racily
 * clean" index entries); a tree touched more recently is listed afresh each time until it has settled.
 * `.git` is excluded by the listing itself (`--glob=!.git`), so it is not stamped. This rests on the file
 * system reporting directory times as they are: true of local ones (ext4, xfs, btrfs, overlayfs, tmpfs);
 * an NFS client with attribute caching may show a directory's times late (worktrees live on local disk).
 *
 * A shared run is killed when the last caller waiting on it leaves (answered, aborted or past its
 * deadline); one caller's abort answers that caller at once and leaves the run to the others.
 */

/** A directory changed less than this long before the stamp makes the tree uncacheable for now. */
const RACY_MARGIN_MS = 2_000;
/** A caller waiting on a shared run gives up this long after its own deadline, if the run has not answered. */
const TIMEOUT_BACKSTOP_MS = 250;
/** After a tree could not be stamped, it is walked again no sooner than this. */
const RESTAMP_INTERVAL_MS = 1_000;
/** Trees with more directories than this are not stamped (the stamp and each check would cost too much). */
const MAX_STAMPED_DIRS = 50_000;
/** Directories read at once while stamping (each batch is one stretch of work on the event loop). */
const STAMP_BATCH_DIRS = 16;
/** One listing kept is at most this big, and all kept listings together at most MAX_CACHED_BYTES. */
const MAX_LISTING_BYTES = 8 * 1024 * 1024;
const MAX_CACHED_BYTES = 64 * 1024 * 1024;

export interface CapturedListing {
  /** The last stage's stdout chunks as the run delivered them, up to where the consumer said 'enough'. */
  chunks: Buffer[];
  outcome: PipelineOutcome;
}

interface DirStamp {
  dir: string;
  ino: bigint;
  mtimeNs: bigint;
  ctimeNs: bigint;
}

interface SharedRun {
  key: string;
  result: Promise<CapturedListing>;
  waiters: number;
  controller: AbortController;
}

interface KeptListing {
  chunks: Buffer[];
  outcome: PipelineOutcome;
  bytes: number;
}

interface RootEntry {
  stamp: DirStamp[];
  listings: Map<string, KeptListing>;
  /** The latest check of the stamp, with when it started (a check started after a call began may serve it). */
  check?: { startedAt: number; valid: Promise<boolean> };
}

export interface GlobCacheStats {
  hits: number;
  misses: number;
  shared: number;
  stored: number;
  invalidated: number;
}

async function stampDir(dir: string): Promise<DirStamp> {
  const stat = await fs.lstat(dir, { bigint: true });
  return { dir, ino: stat.ino, mtimeNs: stat.mtimeNs, ctimeNs: stat.ctimeNs };
}

/** Every directory of the tree (symlinks not followed, `.git` skipped), stamped; null when not cacheable now. */
async function stampTree(root: string): Promise<DirStamp[] | null> {
  const startedMs = Date.now();
  const stamps: DirStamp[] = [];
  const pending = [root];
  try {
    while (pending.length > 0) {
      // Small batches: each batch's entries are handled in one go on the loop.
      const batch = pending.splice(0, STAMP_BATCH_DIRS);
      const found = await Promise.all(
        batch.map(async (dir) => {
          const stamp = await stampDir(dir);
          const entries = await fs.readdir(dir, { withFileTypes: true });
          return { stamp, subdirs: entries.filter((e) => e.isDirectory() && e.name !== '.git').map((e) => path.join(dir, e.name)) };
        }),
      );
      for (const { stamp, subdirs } of found) {
        if (stamp.ctimeNs > BigInt(startedMs - RACY_MARGIN_MS) * 1_000_000n) return null;
        stamps.push(stamp);
        pending.push(...subdirs);
      }
      if (stamps.length + pending.length > MAX_STAMPED_DIRS) return null;
    }
  } catch {
    return null; // an unreadable directory: let ripgrep answer (and report) it every time
  }
  return stamps;
}

async function stampStillValid(stamp: DirStamp[]): Promise<boolean> {
  for (let at = 0; at < stamp.length; at += 256) {
    const now = await Promise.all(stamp.slice(at, at + 256).map((s) => stampDir(s.dir).catch(() => null)));
    for (let k = 0; k < now.length; k++) {
      const before = stamp[at + k]!;
      const after = now[k];
      if (!after || after.ino !== before.ino || after.mtimeNs !== before.mtimeNs || after.ctimeNs !== before.ctimeNs) return false;
    }
  }
  return true;
}

/** A listing may be kept only when ripgrep finished it normally (or the consumer had all it wanted). */
function complete(listing: CapturedListing): boolean {
  const { outcome } = listing;
  const stage = outcome.stages[0];
  if (!stage || outcome.timedOut || outcome.aborted || stage.spawnError || stage.limitExceeded) return false;
  return outcome.stoppedEarly || stage.exitCode === 0 || stage.exitCode === 1;
}

function cancelledOutcome(reason: 'aborted' | 'timeout'): PipelineOutcome {
  return {
    stages: [{ exitCode: null, signal: null, stderr: '' }],
    timedOut: reason === 'timeout',
    stoppedEarly: false,
    aborted: reason === 'aborted',
    elapsedMs: 0,
  };
}

export class GlobListingCache {
  private readonly roots = new Map<string, RootEntry>();
  private readonly stamping = new Map<string, Promise<DirStamp[] | null>>();
  /** Roots whose last stamp failed (a young or unreadable tree), and when to try again: one walk per interval at most. */
  private readonly unstampable = new Map<string, number>();
  private readonly running = new Map<string, SharedRun>();
  private cachedBytes = 0;
  /** Off: every call runs its own listing, as before this cache (the load benchmark's reference). */
  enabled = true;
  readonly stats: GlobCacheStats = { hits: 0, misses: 0, shared: 0, stored: 0, invalidated: 0 };

  /**
   * The listing of `pattern` in the canonical `root`: remembered, shared with a run in flight, or from
   * `run` (called with a signal that fires once every caller sharing it has given up). The caller's own
   * abort and deadline are honoured at once whichever way the listing comes.
   */
  async listing(
    root: string,
    pattern: string,
    wait: { signal?: AbortSignal; timeoutMs: number; calledAt?: number },
    run: (signal: AbortSignal, timeoutMs: number) => Promise<CapturedListing>,
  ): Promise<CapturedListing> {
    // A check of the stamp that started after the tool call did serves it; the calls of one model turn,
    // issued together, then share one check.
    const calledAt = wait.calledAt ?? performance.now();
    if (!this.enabled) return run(wait.signal ?? new AbortController().signal, wait.timeoutMs);
    const kept = await this.remembered(root, pattern, calledAt);
    if (kept) {
      this.stats.hits += 1;
      return {
        chunks: kept.chunks,
        outcome: { ...kept.outcome, stages: kept.outcome.stages.map((stage) => ({ ...stage })), elapsedMs: 0 },
      };
    }
    this.stats.misses += 1;
    const key = `${wait.timeoutMs}\0${root}\0${pattern}`;
    let shared = this.running.get(key);
    if (shared) this.stats.shared += 1;
    else {
      const controller = new AbortController();
      // The run gets what is left of the first caller's budget once the tree is stamped, so its own timeout
      // (which says whether the time went on the queue for permits) is what the callers normally see.
      const result = this.runAndKeep(root, pattern, () =>
        run(controller.signal, Math.max(0, wait.timeoutMs - (performance.now() - calledAt))),
      );
      const entry: SharedRun = { key, result, waiters: 0, controller };
      shared = entry;
      this.running.set(key, entry);
      void result.finally(() => this.unlist(entry));
    }
    return this.await(shared, wait, calledAt);
  }

  /** Forgets everything (tests; a worktree that is about to be rewritten). */
  clear(): void {
    this.roots.clear();
    this.unstampable.clear();
    this.cachedBytes = 0;
  }

  private unlist(run: SharedRun): void {
    if (this.running.get(run.key) === run) this.running.delete(run.key);
  }

  private async await(shared: SharedRun, wait: { signal?: AbortSignal; timeoutMs: number }, calledAt: number): Promise<CapturedListing> {
    shared.waiters += 1;
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    try {
      const gaveUp = new Promise<CapturedListing>((resolve) => {
        onAbort = () => resolve(cancelledListing('aborted'));
        if (wait.signal?.aborted) onAbort();
        wait.signal?.addEventListener('abort', onAbort, { once: true });
        // A backstop for a caller that joined a run started before its own call: its budget holds too.
        const left = wait.timeoutMs - (performance.now() - calledAt) + TIMEOUT_BACKSTOP_MS;
        timer = setTimeout(() => resolve(cancelledListing('timeout')), Math.max(0, left));
      });
      return await Promise.race([shared.result, gaveUp]);
    } finally {
      clearTimeout(timer);
      if (onAbort) wait.signal?.removeEventListener('abort', onAbort);
      // The last caller to leave (answered, or given up) stops the run; no later caller may join a stopped one.
      shared.waiters -= 1;
      if (shared.waiters === 0) {
        this.unlist(shared);
        shared.controller.abort();
      }
    }
  }

  private async runAndKeep(root: string, pattern: string, run: () => Promise<CapturedListing>): Promise<CapturedListing> {
    // The stamp must describe the tree as it was before ripgrep read it (stampTree's comment).
    const stamp = await this.stampOf(root);
    const listing = await run();
    if (!stamp || !complete(listing)) return listing;
    const bytes = listing.chunks.reduce((n, c) => n + c.length, 0);
    if (bytes > MAX_LISTING_BYTES) return listing;
    const entry = this.roots.get(root);
    if (!entry || entry.stamp !== stamp) return listing;
    // Kept only when nothing changed from the stamp to the end of the run.
    if (!(await this.checkedAfter(root, entry, performance.now()))) return listing;
    if (entry.listings.has(pattern)) return listing;
    entry.listings.set(pattern, { chunks: listing.chunks, outcome: listing.outcome, bytes });
    this.cachedBytes += bytes;
    this.stats.stored += 1;
    this.evict();
    return listing;
  }

  private async stampOf(root: string): Promise<DirStamp[] | null> {
    const entry = this.roots.get(root);
    if (entry) return entry.stamp;
    if ((this.unstampable.get(root) ?? 0) > Date.now()) return null;
    let stamping = this.stamping.get(root);
    if (!stamping) {
      stamping = stampTree(root).then((stamp) => {
        this.stamping.delete(root);
        if (stamp) {
          this.unstampable.delete(root);
          this.roots.set(root, { stamp, listings: new Map() });
        } else {
          this.unstampable.set(root, Date.now() + RESTAMP_INTERVAL_MS);
        }
        return stamp;
      });
      this.stamping.set(root, stamping);
    }
    return stamping;
  }

  private async remembered(root: string, pattern: string, calledAt: number): Promise<KeptListing | null> {
    const entry = this.roots.get(root);
    if (!entry || !entry.listings.has(pattern)) return null;
    if (!(await this.checkedAfter(root, entry, calledAt))) return null;
    const kept = entry.listings.get(pattern);
    if (!kept) return null;
    // Most recently used last (eviction takes the first roots).
    this.roots.delete(root);
    this.roots.set(root, entry);
    return kept;
  }

  /** Whether the stamp still holds, by a check that started no earlier than `since` (shared by concurrent calls). */
  private async checkedAfter(root: string, entry: RootEntry, since: number): Promise<boolean> {
    if (!entry.check || entry.check.startedAt < since) {
      const valid = stampStillValid(entry.stamp);
      entry.check = { startedAt: performance.now(), valid };
      void valid.then((ok) => {
        if (!ok && this.roots.get(root) === entry) {
          this.roots.delete(root);
          for (const kept of entry.listings.values()) this.cachedBytes -= kept.bytes;
          this.stats.invalidated += 1;
        }
      });
    }
    return entry.check.valid;
  }

  private evict(): void {
    for (const [root, entry] of this.roots) {
      if (this.cachedBytes <= MAX_CACHED_BYTES) return;
      this.roots.delete(root);
      for (const kept of entry.listings.values()) this.cachedBytes -= kept.bytes;
    }
  }
}

function cancelledListing(reason: 'aborted' | 'timeout'): CapturedListing {
  return { chunks: [], outcome: cancelledOutcome(reason) };
}

/** The worker's one cache (the sandbox's tools run in one process per worker). */
export const globListingCache = new GlobListingCache();
