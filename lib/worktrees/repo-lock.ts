import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { createKeyedLock } from '../locks/keyed-lock';
import { WorktreeError } from './errors';

/**
 * Serializes work on one repository: an async mutex for callers in this process, and an O_EXCL lock file
 * for other processes (two workers may share one cache directory).
 *
 * The lock file holds `{ pid, host, token, createdAt }` and its holder touches it every `staleAfterMs / 4`.
 * A lock is stale, and is broken, when its process is gone (same host), when it carries this process's pid
 * but a token this process never issued (a restarted container reusing the pid), or when nobody touched it
 * for `staleAfterMs` (another host, or a frozen holder). Breaking goes through a second O_EXCL file and
 * re-reads the lock first, so two waiters that both saw the same stale lock cannot delete a fresh one.
 */
export interface LockOptions {
  /** How long to wait for a busy lock before failing with a retryable `lock-timeout` (default 20 min). */
  waitTimeoutMs?: number;
  /** A lock nobody touched for this long is stale (default 60 s). */
  staleAfterMs?: number;
  signal?: AbortSignal;
}

interface LockBody {
  pid: number;
  host: string;
  token: string;
  createdAt: string;
}

const DEFAULT_WAIT_MS = 20 * 60_000;
const DEFAULT_STALE_MS = 60_000;
/** A lock file without a readable body was left by a writer killed between create and write. */
const UNREADABLE_STALE_MS = 5_000;
const BREAKER_STALE_MS = 10_000;

const heldTokens = new Set<string>();
const processMutex = createKeyedLock();

export async function withRepoLock<T>(lockPath: string, fn: () => Promise<T>, opts: LockOptions = {}): Promise<T> {
  const key = path.resolve(lockPath);
  return processMutex.run(key, async () => {
    const lock = await acquireFileLock(key, opts);
    try {
      return await fn();
    } finally {
      await lock.release();
    }
  });
}

export interface FileLock {
  release(): Promise<void>;
}

/** The cross-process half on its own (exported for tests of the file protocol). */
export async function acquireFileLock(lockPath: string, opts: LockOptions = {}): Promise<FileLock> {
  const waitTimeoutMs = opts.waitTimeoutMs ?? DEFAULT_WAIT_MS;
  const staleAfterMs = opts.staleAfterMs ?? DEFAULT_STALE_MS;
  await fs.mkdir(path.dirname(lockPath), { recursive: true });
  const started = Date.now();
  let pause = 20;
  for (;;) {
    if (opts.signal?.aborted) {
      throw new WorktreeError('aborted', `aborted while waiting for lock ${lockPath}`, { retryable: true });
    }
    const body: LockBody = { pid: process.pid, host: hostname(), token: randomUUID(), createdAt: new Date().toISOString() };
    if (await tryCreate(lockPath, JSON.stringify(body))) return holdLock(lockPath, body.token, staleAfterMs);

    const seen = await inspect(lockPath);
    if (seen && isStale(seen, staleAfterMs)) {
      await breakStaleLock(lockPath, seen.raw);
      continue;
    }
    if (Date.now() - started > waitTimeoutMs) {
      const holder = seen?.body ? `pid ${seen.body.pid} on ${seen.body.host} since ${seen.body.createdAt}` : 'unknown holder';
      throw new WorktreeError('lock-timeout', `timed out after ${waitTimeoutMs} ms waiting for ${lockPath} (${holder})`, {
        retryable: true,
      });
    }
    await sleep(pause);
    pause = Math.min(pause * 2, 500);
  }
}

async function tryCreate(file: string, content: string): Promise<boolean> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(file, 'wx');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw e;
  }
  try {
    await handle.writeFile(content);
  } finally {
    await handle.close();
  }
  return true;
}

interface SeenLock {
  raw: string;
  body: LockBody | undefined;
  mtimeMs: number;
}

async function inspect(lockPath: string): Promise<SeenLock | undefined> {
  try {
    const [raw, st] = await Promise.all([fs.readFile(lockPath, 'utf8'), fs.stat(lockPath)]);
    return { raw, body: parseBody(raw), mtimeMs: st.mtimeMs };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

function parseBody(raw: string): LockBody | undefined {
  try {
    const b = JSON.parse(raw) as Partial<LockBody>;
    if (typeof b.pid === 'number' && typeof b.host === 'string' && typeof b.token === 'string') {
      return { pid: b.pid, host: b.host, token: b.token, createdAt: String(b.createdAt ?? '') };
    }
  } catch {
    // fall through: an unreadable body
  }
  return undefined;
}

function isStale(seen: SeenLock, staleAfterMs: number): boolean {
  const age = Date.now() - seen.mtimeMs;
  if (!seen.body) return age > Math.min(UNREADABLE_STALE_MS, staleAfterMs);
  if (age > staleAfterMs) return true;
  if (seen.body.host !== hostname()) return false;
  if (seen.body.pid === process.pid) return !heldTokens.has(seen.body.token);
  return !processAlive(seen.body.pid);
}

/** Whether a process of this host has id `pid` (one we may not signal still runs). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function breakStaleLock(lockPath: string, staleRaw: string): Promise<void> {
  const breaker = `${lockPath}.break`;
  if (!(await tryCreate(breaker, String(process.pid)))) {
    // Someone else is breaking it; a breaker left by a killed process is cleared after a while.
    try {
      const st = await fs.stat(breaker);
      if (Date.now() - st.mtimeMs > BREAKER_STALE_MS) await fs.rm(breaker, { force: true });
    } catch {
      // gone already
    }
    await sleep(20);
    return;
  }
  try {
    const now = await fs.readFile(lockPath, 'utf8').catch(() => undefined);
    if (now === staleRaw) await fs.rm(lockPath, { force: true });
  } finally {
    await fs.rm(breaker, { force: true });
  }
}

function holdLock(lockPath: string, token: string, staleAfterMs: number): FileLock {
  heldTokens.add(token);
  const touch = setInterval(
    () => {
      const now = new Date();
      fs.utimes(lockPath, now, now).catch(() => undefined);
    },
    Math.max(10, Math.floor(staleAfterMs / 4)),
  );
  touch.unref();
  let released = false;
  return {
    async release() {
      if (released) return;
      released = true;
      clearInterval(touch);
      heldTokens.delete(token);
      const raw = await fs.readFile(lockPath, 'utf8').catch(() => undefined);
      if (raw !== undefined && parseBody(raw)?.token === token) await fs.rm(lockPath, { force: true });
    },
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
