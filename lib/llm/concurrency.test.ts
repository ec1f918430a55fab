import { describe, expect, it } from 'vitest';
import { createLimiter } from './concurrency';

const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('createLimiter', () => {
  it('never runs more than the limit, runs exactly the limit when work is waiting, and keeps order', async () => {
    const limiter = createLimiter(3);
    let active = 0;
    let peak = 0;
    const started: number[] = [];
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        limiter.run(async () => {
          started.push(i);
          active += 1;
          peak = Math.max(peak, active);
          expect(limiter.active).toBeLessThanOrEqual(3);
          await tick(5);
          active -= 1;
          return i * 2;
        }),
      ),
    );
    expect(peak).toBe(3);
    expect(started).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(results).toEqual([0, 2, 4, 6, 8, 10, 12, 14, 16, 18]);
    expect(limiter.active).toBe(0);
    expect(limiter.waiting).toBe(0);
  });

  it('frees the slot when a task throws, ignores a second release, and idle() waits for the last task', async () => {
    const limiter = createLimiter(1);
    await expect(limiter.run(async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    const release = await limiter.acquire();
    const second = limiter.acquire();
    expect(limiter.waiting).toBe(1);
    release();
    release();
    const releaseSecond = await second;
    expect(limiter.active).toBe(1);
    let idle = false;
    const idlePromise = limiter.idle().then(() => (idle = true));
    await tick(5);
    expect(idle).toBe(false);
    releaseSecond();
    await idlePromise;
    expect(limiter.active).toBe(0);
  });

  it('defaults to 16 and rejects a bad limit', () => {
    expect(createLimiter().limit).toBe(16);
    expect(() => createLimiter(0)).toThrow(/integer ≥ 1, got 0/);
    expect(() => createLimiter(2.5)).toThrow(/got 2.5/);
  });
});
