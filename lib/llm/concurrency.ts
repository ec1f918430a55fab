import pLimit from 'p-limit';

/** The judge's default number of concurrent LLM calls (config `judge.concurrency`). */
export const DEFAULT_LLM_CONCURRENCY = 16;

/**
 * At most `limit` tasks in flight; the others wait in arrival order. `acquire()` lets a producer wait for a
 * free slot before it even reads its next input, so a large stream is never pulled ahead into memory.
 */
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

/**
 * The project's one general-purpose limiter: `p-limit` does the queueing; this adds only what p-limit lacks,
 * `acquire()` (a slot held until released, for a producer that must not read ahead) and `idle()`.
 *
 * The other limiters stay on purpose: lib/sandbox/semaphore.ts takes several permits at once, with deadlines
 * and abort (the security tests pin those semantics); the workflows' lanes (workflows/evaluation.ts settleAll,
 * workflows/downstream.ts) run inside the deterministic workflow sandbox.
 */
export function createLimiter(limit: number = DEFAULT_LLM_CONCURRENCY): Limiter {
  if (!Number.isInteger(limit) || limit < 1) {
    throw new Error(`concurrency limit must be an integer ≥ 1, got ${limit}`);
  }
  const gate = pLimit(limit);
  let idleWaiters: Array<() => void> = [];
  // Runs once a task's promise from the gate settled, which is after p-limit has freed its slot.
  const notifyIdle = () => {
    if (gate.activeCount === 0 && gate.pendingCount === 0) {
      const waiters = idleWaiters;
      idleWaiters = [];
      for (const wake of waiters) wake();
    }
  };

  return {
    limit,
    get active() {
      return gate.activeCount;
    },
    get waiting() {
      return gate.pendingCount;
    },
    acquire() {
      return new Promise<() => void>((granted) => {
        const held = gate(
          () =>
            new Promise<void>((release) => {
              let released = false;
              granted(() => {
                if (released) return;
                released = true;
                release();
              });
            }),
        );
        void held.then(notifyIdle);
      });
    },
    run<T>(task: () => Promise<T>): Promise<T> {
      const result = gate(task);
      result.then(notifyIdle, notifyIdle);
      return result;
    },
    idle() {
      if (gate.activeCount === 0 && gate.pendingCount === 0) return Promise.resolve();
      return new Promise((resolve) => idleWaiters.push(resolve));
    },
  };
}
