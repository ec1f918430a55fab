import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runTool } from '../../lib/sandbox/run-tool';
import { Semaphore, PermitWaitError, subprocessSlots } from '../../lib/sandbox/semaphore';
import { makeSandboxFixture, type SandboxFixture } from '../fixtures/sandbox/fixture';
import type { ToolResult } from '../../schemas/tools';
import { recordAttack } from './attack-log';

/**
 * Finding 4: timeouts that mean what they say. The deadline covers the wait for a permit, an abort takes
 * effect within 100 ms wherever the call is (queued or running), and a read of a 70-byte file never says
 * "too large" because the loop was busy. Exercised with 200 concurrent mixed calls (globs over a big tree
 * among them) against the real process-wide Semaphore(64).
 */
let fx: SandboxFixture;
const TREE_FILES = 20_000;

beforeAll(async () => {
  fx = await makeSandboxFixture();
  await fs.writeFile(path.join(fx.root, 'small.txt'), 'a seventy-byte file: small enough to read in one chunk, every time.\n');
  for (let d = 0; d < 100; d++) {
    const dir = path.join(fx.root, 'big', `d${d}`);
    await fs.mkdir(dir, { recursive: true });
    await Promise.all(Array.from({ length: TREE_FILES / 100 }, (_, k) => fs.writeFile(path.join(dir, `f${k}.py`), '')));
  }
}, 300_000);
afterAll(() => fx.cleanup());

function mixedCalls(count: number, signal?: AbortSignal): Array<Promise<{ kind: string; result: ToolResult; doneAt: number }>> {
  return Array.from({ length: count }, (_, k) => {
    const kind = ['glob', 'read', 'grep', 'terminal'][k % 4]!;
    const options = signal ? { signal } : {};
    const call =
      kind === 'glob'
        ? runTool(fx.root, 'glob', { pattern: 'big/**/*.py' }, options)
        : kind === 'read'
          ? runTool(fx.root, 'read', { path: 'small.txt' }, options)
          : kind === 'grep'
            ? runTool(fx.root, 'grep', { pattern: 'helper', path: 'src' }, options)
            : runTool(fx.root, 'terminal', { command: 'find big -name "f1*.py" | wc -l' }, options);
    return call.then((result) => ({ kind, result, doneAt: Date.now() }));
  });
}

describe('finding 4: permit waits are bounded', () => {
  it('a queued acquire gives up at its deadline and on abort, and leaves the queue moving', async () => {
    const s = new Semaphore(1);
    const held = await s.acquire();
    const started = Date.now();
    await expect(s.acquire(1, { deadline: Date.now() + 50 })).rejects.toMatchObject({ reason: 'timeout' });
    expect(Date.now() - started).toBeLessThan(500);
    const controller = new AbortController();
    const waiting = s.acquire(1, { signal: controller.signal });
    const behind = s.acquire(1);
    controller.abort();
    await expect(waiting).rejects.toBeInstanceOf(PermitWaitError);
    held();
    (await behind)();
    expect(s.inUse).toBe(0);
  });

  it('a tool call whose whole budget goes on the queue says so, and no permit leaks', async () => {
    const hogs = await Promise.all(Array.from({ length: subprocessSlots.capacity }, () => subprocessSlots.acquire()));
    try {
      const started = Date.now();
      const results = await Promise.all([
        runTool(fx.root, 'read', { path: 'small.txt' }, { timeoutMs: 200 }),
        runTool(fx.root, 'grep', { pattern: 'x' }, { timeoutMs: 200 }),
        runTool(fx.root, 'glob', { pattern: '*.py' }, { timeoutMs: 200 }),
        runTool(fx.root, 'terminal', { command: 'ls' }, { timeoutMs: 200 }),
      ]);
      const elapsed = Date.now() - started;
      recordAttack(
        'all tools',
        'every call queued behind a saturated Semaphore(64)',
        results.every((r) => r.status === 'error') ? 'contained' : 'escaped',
      );
      for (const r of results)
        expect(r).toMatchObject({ status: 'error', message: expect.stringMatching(/waiting for a free subprocess slot/) });
      expect(elapsed).toBeLessThan(1500);
    } finally {
      hogs.forEach((release) => release());
    }
    expect(subprocessSlots.inUse).toBe(0);
  });
});

describe('finding 4: 200 concurrent calls', () => {
  it('every read of a 70-byte file succeeds while 200 mixed calls run', async () => {
    const done = await Promise.all(mixedCalls(200));
    const reads = done.filter((d) => d.kind === 'read');
    recordAttack(
      'read',
      'small reads among 200 concurrent calls (50 globs over 20k files)',
      reads.every((d) => d.result.status === 'ok') ? 'contained' : 'escaped',
    );
    expect(reads).toHaveLength(50);
    expect(reads.filter((d) => d.result.status !== 'ok').map((d) => d.result.message)).toEqual([]);
    for (const d of reads) expect(d.result.output).toContain('a seventy-byte file');
    expect(subprocessSlots.inUse).toBe(0);
  }, 120_000);

  it('one abort ends all 200 calls, queued or running, within 100 ms', async () => {
    const controller = new AbortController();
    const calls = mixedCalls(200, controller.signal);
    await new Promise((r) => setTimeout(r, 300));
    const abortedAt = Date.now();
    controller.abort();
    const done = await Promise.all(calls);
    const late = done.map((d) => d.doneAt - abortedAt).filter((ms) => ms > 100);
    recordAttack('all tools', 'abort of 200 concurrent calls', late.length === 0 ? 'contained' : 'escaped');
    expect(late).toEqual([]);
    const stillRunning = done.filter((d) => d.doneAt >= abortedAt);
    const cancelled = stillRunning.filter((d) => d.result.status === 'error' && /cancelled/.test(d.result.message ?? ''));
    expect(cancelled.length).toBeGreaterThan(0);
    // A call whose program had already finished when the abort came may still settle with its result (`ok`, or
    // `truncated` for a long listing) just after it (the result was waiting on the event loop, more so on a busy
    // machine); any other end after the abort is a cancellation.
    for (const d of stillRunning) {
      if (d.result.status === 'ok' || d.result.status === 'truncated') expect(d.doneAt - abortedAt).toBeLessThanOrEqual(100);
      else expect(d.result).toMatchObject({ status: 'error', message: expect.stringMatching(/cancelled/) });
    }
    // The killed groups' permits come back once the kernel has reaped them.
    for (let waited = 0; subprocessSlots.inUse > 0 && waited < 10_000; waited += 20) await new Promise((r) => setTimeout(r, 20));
    expect(subprocessSlots.inUse).toBe(0);
  }, 120_000);
});
