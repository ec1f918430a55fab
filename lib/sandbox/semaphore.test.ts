import { describe, expect, it } from 'vitest';
import { PAPER_LIMITS } from './limits';
import { Semaphore, subprocessSlots } from './semaphore';

describe('Semaphore', () => {
  it('holds callers beyond capacity until a permit is released', async () => {
    const s = new Semaphore(2);
    const a = await s.acquire();
    const b = await s.acquire();
    let third = false;
    const pending = s.acquire().then((release) => {
      third = true;
      return release;
    });
    await new Promise((r) => setTimeout(r, 10));
    expect(third).toBe(false);
    expect(s.inUse).toBe(2);
    a();
    a(); // idempotent: a second release frees nothing
    const c = await pending;
    expect(third).toBe(true);
    expect(s.inUse).toBe(2);
    b();
    c();
    expect(s.inUse).toBe(0);
    expect(s.peakInUse).toBe(2);
  });

  it('serves multi-permit waiters first-in first-out (no starvation)', async () => {
    const s = new Semaphore(3);
    const first = await s.acquire(2);
    const order: string[] = [];
    const big = s.acquire(3).then((r) => (order.push('big'), r));
    const small = s.acquire(1).then((r) => (order.push('small'), r));
    await new Promise((r) => setTimeout(r, 5));
    // One permit is free but the small waiter queued behind the big one waits its turn.
    expect(order).toEqual([]);
    first();
    (await big)();
    (await small)();
    expect(order).toEqual(['big', 'small']);
  });

  it('rejects impossible requests instead of hanging', async () => {
    const s = new Semaphore(2);
    await expect(s.acquire(3)).rejects.toThrow(/permits must be an integer in 1\.\.2/);
    await expect(s.acquire(0)).rejects.toThrow();
    expect(() => new Semaphore(0)).toThrow(/positive integer/);
  });

  it('accounts bytes next to permits, with no byte budget meaning unlimited', async () => {
    const unlimited = new Semaphore(2);
    const a = await unlimited.acquire(1, {}, 10 ** 12);
    expect(unlimited.bytesInUse).toBe(10 ** 12);
    a();
    expect(unlimited.bytesInUse).toBe(0);
    expect(unlimited.peakBytesInUse).toBe(10 ** 12);
    unlimited.resetPeak();
    expect(unlimited.peakBytesInUse).toBe(0);

    const budgeted = new Semaphore(4, 100);
    const first = await budgeted.acquire(1, {}, 70);
    // A permit is free but the bytes are not: the deadline passes while waiting, and nothing leaks.
    await expect(budgeted.acquire(1, { deadline: Date.now() + 20 }, 40)).rejects.toMatchObject({ reason: 'timeout' });
    first();
    expect([budgeted.inUse, budgeted.bytesInUse]).toEqual([0, 0]);
    await expect(budgeted.acquire(1, {}, -1)).rejects.toThrow(/bytes must be a finite non-negative number/);
    expect(() => new Semaphore(1, 0)).toThrow(/byte capacity must be positive/);
  });

  it("the global limit is the paper's Semaphore(64)", () => {
    expect(PAPER_LIMITS.maxConcurrentSubprocesses).toBe(64);
    expect(subprocessSlots.capacity).toBe(64);
  });
});
