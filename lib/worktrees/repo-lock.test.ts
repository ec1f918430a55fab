import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorktreeError } from './errors';
import { acquireFileLock, withRepoLock } from './repo-lock';
import { bareMirror, createSyntheticRepo } from './synthetic-repo';

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, '../..');
let root: string;

beforeAll(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), 'codegrep-lock-'));
});
afterAll(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

/** The pid of a process that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
  await new Promise((r) => child.once('close', r));
  return child.pid!;
}

describe('withRepoLock', () => {
  it('runs callers for one lock one at a time, and different locks in parallel', async () => {
    const log: string[] = [];
    const job = (lock: string, name: string, ms: number) =>
      withRepoLock(path.join(root, lock), async () => {
        log.push(`${name}+`);
        await new Promise((r) => setTimeout(r, ms));
        log.push(`${name}-`);
      });
    await Promise.all([job('a.lock', 'a1', 60), job('a.lock', 'a2', 10), job('b.lock', 'b1', 20)]);
    expect(log.indexOf('a1-')).toBeLessThan(log.indexOf('a2+'));
    expect(log.indexOf('b1+')).toBeLessThan(log.indexOf('a1-'));
    await expect(fs.access(path.join(root, 'a.lock'))).rejects.toThrow();
  });

  it('releases the lock when the work throws', async () => {
    const lock = path.join(root, 'throws.lock');
    await expect(withRepoLock(lock, async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await withRepoLock(lock, async () => 'next')).toBe('next');
  });
});

describe('acquireFileLock', () => {
  it('makes a second holder wait until the first releases', async () => {
    const lock = path.join(root, 'file.lock');
    const first = await acquireFileLock(lock);
    const body = JSON.parse(await fs.readFile(lock, 'utf8')) as { pid: number; host: string };
    expect(body).toMatchObject({ pid: process.pid, host: hostname() });
    let secondGot = false;
    const second = acquireFileLock(lock).then((l) => {
      secondGot = true;
      return l;
    });
    await new Promise((r) => setTimeout(r, 150));
    expect(secondGot).toBe(false);
    await first.release();
    await (await second).release();
    expect(secondGot).toBe(true);
  });

  it('breaks a lock left by a process that died', async () => {
    const lock = path.join(root, 'dead.lock');
    await fs.writeFile(lock, JSON.stringify({ pid: await deadPid(), host: hostname(), token: 't', createdAt: 'then' }));
    const t0 = performance.now();
    const l = await acquireFileLock(lock, { waitTimeoutMs: 2_000 });
    expect(performance.now() - t0).toBeLessThan(1_000);
    await l.release();
  });

  it('breaks a lock with this pid that this process never took (a restarted container)', async () => {
    const lock = path.join(root, 'reused-pid.lock');
    await fs.writeFile(lock, JSON.stringify({ pid: process.pid, host: hostname(), token: 'old', createdAt: 'then' }));
    const l = await acquireFileLock(lock, { waitTimeoutMs: 2_000 });
    await l.release();
  });

  it('breaks an unreadable lock only once it is old', async () => {
    const lock = path.join(root, 'garbage.lock');
    await fs.writeFile(lock, '');
    await expect(acquireFileLock(lock, { waitTimeoutMs: 200 })).rejects.toThrow(/timed out/);
    const old = new Date(Date.now() - 60_000);
    await fs.utimes(lock, old, old);
    await (await acquireFileLock(lock, { waitTimeoutMs: 2_000 })).release();
  });

  it('waits for a live holder and fails with a retryable lock-timeout naming it', async () => {
    const lock = path.join(root, 'live.lock');
    await fs.writeFile(lock, JSON.stringify({ pid: process.ppid, host: hostname(), token: 'x', createdAt: 'now' }));
    const err = await acquireFileLock(lock, { waitTimeoutMs: 200 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorktreeError);
    expect((err as WorktreeError).code).toBe('lock-timeout');
    expect((err as WorktreeError).retryable).toBe(true);
    expect((err as WorktreeError).message).toContain(`pid ${process.ppid}`);
    // A holder that stopped touching its lock (frozen, or on another host) is stale after staleAfterMs.
    const old = new Date(Date.now() - 10_000);
    await fs.utimes(lock, old, old);
    await (await acquireFileLock(lock, { waitTimeoutMs: 2_000, staleAfterMs: 5_000 })).release();
  });

  it('keeps a held lock fresh so waiters never take it as stale', async () => {
    const lock = path.join(root, 'fresh.lock');
    const held = await acquireFileLock(lock, { staleAfterMs: 200 });
    const err = await acquireFileLock(lock, { waitTimeoutMs: 600, staleAfterMs: 200 }).catch((e: unknown) => e);
    expect((err as WorktreeError).code).toBe('lock-timeout');
    await held.release();
  });
});

describe('ensureWorktree across processes', () => {
  it('two worker processes sharing a cache make one commit once', async () => {
    const src = await createSyntheticRepo(path.join(root, 'src'), { files: 20, commits: 2 });
    await bareMirror(src.dir, path.join(root, 'mirrors', 'acme__shared.git'));
    const opts = {
      cacheDir: path.join(root, 'cache'),
      worktreesDir: path.join(root, 'worktrees'),
      source: { kind: 'mirror-dir', dir: path.join(root, 'mirrors') },
    };
    const script = path.join(root, 'worker.mts');
    await fs.writeFile(
      script,
      `import { ensureWorktree } from ${JSON.stringify(path.join(here, 'worktree'))};\n` +
        `const r = await ensureWorktree('acme/shared', ${JSON.stringify(src.commits[1])}, ${JSON.stringify(opts)});\n` +
        `console.log(JSON.stringify(r));\n`,
    );
    const run = () =>
      new Promise<{ status: string; path: string }>((resolve, reject) => {
        const child = spawn(path.join(repoRoot, 'node_modules', '.bin', 'tsx'), [script], {
          cwd: repoRoot,
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let out = '';
        let err = '';
        child.stdout.on('data', (b: Buffer) => (out += b.toString()));
        child.stderr.on('data', (b: Buffer) => (err += b.toString()));
        child.once('close', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').at(-1)!)) : reject(new Error(err))));
      });
    const [a, b] = await Promise.all([run(), run()]);
    expect([a.status, b.status].sort()).toEqual(['created', 'reused']);
    expect(a.path).toBe(b.path);
  });
});
