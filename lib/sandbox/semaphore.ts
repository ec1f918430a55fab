import { PAPER_LIMITS } from './limits';

type Waiter = { permits: number; grant: () => void };

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

  /** Resolves with a release function once `permits` permits are held. Release is idempotent. */
  acquire(permits = 1): Promise<() => void> {
    if (!Number.isInteger(permits) || permits < 1 || permits > this.capacity) {
      return Promise.reject(
        new Error(`Semaphore.acquire: permits must be an integer in 1..${this.capacity}, got ${permits}`),
      );
    }
    return new Promise((resolve) => {
      const grant = () => {
        this.available -= permits;
        this.peak = Math.max(this.peak, this.inUse);
        let released = false;
        resolve(() => {
          if (released) return;
          released = true;
          this.available += permits;
          this.drain();
        });
      };
      this.queue.push({ permits, grant });
      this.drain();
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
