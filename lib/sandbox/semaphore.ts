import { PAPER_LIMITS } from './limits';

type Waiter = { permits: number; grant: () => void };

export interface PermitWait {
  signal?: AbortSignal;
  /** Epoch milliseconds after which the wait is abandoned. */
  deadline?: number;
}

/** A bounded permit wait that ended without a permit. */
export class PermitWaitError extends Error {
  constructor(readonly reason: 'aborted' | 'timeout') {
    super(
      reason === 'aborted' ? 'cancelled while waiting for a free subprocess slot' : 'timed out while waiting for a free subprocess slot',
    );
    this.name = 'PermitWaitError';
  }
}

/**
 * A counting semaphore with multi-permit acquisition. Waiters are served strictly first-in first-out, so a
 * pipeline asking for several permits at once is never starved by single-permit callers and two pipelines
 * can never deadlock holding half of what each needs.
 */
export class Semaphore {
  private available: number;
  private readonly queue: Waiter[] = [];
  private peak = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new Error(`Semaphore capacity must be a positive integer, got ${capacity}`);
    }
    this.available = capacity;
  }

  get inUse(): number {
    return this.capacity - this.available;
  }

  /** Highest number of permits held at once since construction or the last resetPeak(). */
  get peakInUse(): number {
    return this.peak;
  }

  resetPeak(): void {
    this.peak = this.inUse;
  }

  /**
   * Resolves with a release function once `permits` permits are held. Release is idempotent. With `wait`,
   * the wait itself is bounded: it rejects with a PermitWaitError ('aborted' at once when the signal fires,
   * 'timeout' when `deadline` — an epoch-ms time, the caller's whole budget — passes first), and the
   * abandoned place in the queue is given up, so callers behind it move on.
   */
  acquire(permits = 1, wait: PermitWait = {}): Promise<() => void> {
    if (!Number.isInteger(permits) || permits < 1 || permits > this.capacity) {
      return Promise.reject(new Error(`Semaphore.acquire: permits must be an integer in 1..${this.capacity}, got ${permits}`));
    }
    if (wait.signal?.aborted) return Promise.reject(new PermitWaitError('aborted'));
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const cleanup = () => {
        if (timer) clearTimeout(timer);
        wait.signal?.removeEventListener('abort', onAbort);
      };
      const waiter: Waiter = {
        permits,
        grant: () => {
          cleanup();
          this.available -= permits;
          this.peak = Math.max(this.peak, this.inUse);
          let released = false;
          resolve(() => {
            if (released) return;
            released = true;
            this.available += permits;
            this.drain();
          });
        },
      };
      const giveUp = (reason: 'aborted' | 'timeout') => {
        const at = this.queue.indexOf(waiter);
        if (at === -1) return; // already granted
        this.queue.splice(at, 1);
        cleanup();
        reject(new PermitWaitError(reason));
        this.drain();
      };
      const onAbort = () => giveUp('aborted');
      this.queue.push(waiter);
      this.drain();
      if (this.queue.includes(waiter)) {
        wait.signal?.addEventListener('abort', onAbort, { once: true });
        if (wait.deadline !== undefined) timer = setTimeout(() => giveUp('timeout'), Math.max(0, wait.deadline - Date.now()));
      }
    });
  }

  private drain(): void {
    while (this.queue.length > 0 && this.queue[0]!.permits <= this.available) {
      this.queue.shift()!.grant();
    }
  }
}

/**
 * The one process-wide limit on concurrent sandbox subprocesses, shared by every tool and every worktree
 * (CodeGrep App. A.1: a global Semaphore(64)).
 */
export const subprocessSlots = new Semaphore(PAPER_LIMITS.maxConcurrentSubprocesses);
