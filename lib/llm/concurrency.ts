/**
 * At most `limit` tasks in flight; the others wait in arrival order. `acquire()` lets a producer wait for a
 * free slot before it even reads its next input, so a large stream is never pulled ahead into memory.
 */
export const DEFAULT_LLM_CONCURRENCY = 16;

export interface Limiter {
  readonly limit: number;
  readonly active: number;
  readonly waiting: number;
  /** Resolves with a release function once a slot is free; call it exactly once (extra calls are ignored). */
  acquire(): Promise<() => void>;
  run<T>(task: () => Promise<T>): Promise<T>;
  /** Resolves when nothing is active or waiting. */
  idle(): Promise<void>;
}

export function createLimiter(limit: number = DEFAULT_LLM_CONCURRENCY): Limiter {
  if (!Number.isInteger(limit) || limit < 1) {
    throw new Error(`concurrency limit must be an integer ≥ 1, got ${limit}`);
  }
  let active = 0;
  const queue: Array<() => void> = [];
  let idleWaiters: Array<() => void> = [];

  const notifyIdle = () => {
    if (active === 0 && queue.length === 0) {
      const waiters = idleWaiters;
      idleWaiters = [];
      for (const wake of waiters) wake();
    }
  };

  const makeRelease = () => {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = queue.shift();
      if (next) {
        next();
      } else {
        active -= 1;
        notifyIdle();
      }
    };
  };

  const acquire = (): Promise<() => void> => {
    if (active < limit) {
      active += 1;
      return Promise.resolve(makeRelease());
    }
    // The slot passes straight from the releasing task to the next waiter: `active` stays unchanged.
    return new Promise((resolve) => queue.push(() => resolve(makeRelease())));
  };

  return {
    limit,
    get active() {
      return active;
    },
    get waiting() {
      return queue.length;
    },
    acquire,
    async run<T>(task: () => Promise<T>): Promise<T> {
      const release = await acquire();
      try {
        return await task();
      } finally {
        release();
      }
    },
    idle() {
      if (active === 0 && queue.length === 0) return Promise.resolve();
      return new Promise((resolve) => idleWaiters.push(resolve));
    },
  };
}
