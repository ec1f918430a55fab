import { PAPER_LIMITS, sandboxMemoryBudgetBytes } from './limits';

type Waiter = { permits: number; bytes: number; grant: () => void };

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
 * A counting semaphore with multi-permit acquisition and a second, weighted budget in bytes. Waiters are
 * served strictly first-in first-out and only when both their permits and their bytes fit, so a pipeline
 * asking for several permits at once is never starved by single-permit callers and two pipelines can never
 * deadlock holding half of what each needs. The byte budget is what keeps the sum of the sandboxed
 * programs' memory caps under a fraction of the machine (each stage holds its address-space cap while it
 * runs, whatever it actually uses: the cap is what it may reach).
 */
export class Semaphore {
  private available: number;
  private bytesHeld = 0;
  private readonly queue: Waiter[] = [];
  private peak = 0;
  private peakBytes = 0;

  constructor(
    readonly capacity: number,
    readonly byteCapacity: number = Number.POSITIVE_INFINITY,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new Error(`Semaphore capacity must be a positive integer, got ${capacity}`);
    }
    if (!(byteCapacity > 0)) throw new Error(`Semaphore byte capacity must be positive, got ${byteCapacity}`);
    this.available = capacity;
  }

  get inUse(): number {
    return this.capacity - this.available;
  }

  /** Bytes of the weighted budget held now. */
  get bytesInUse(): number {
    return this.bytesHeld;
  }

  /** Most bytes held at once since construction or the last resetPeak(). */
  get peakBytesInUse(): number {
    return this.peakBytes;
  }

  /** Highest number of permits held at once since construction or the last resetPeak(). */
  get peakInUse(): number {
    return this.peak;
  }

  resetPeak(): void {
    this.peak = this.inUse;
    this.peakBytes = this.bytesInUse;
  }

  /**
   * Resolves with a release function once `permits` permits are held. Release is idempotent. With `wait`,
   * the wait itself is bounded: it rejects with a PermitWaitError ('aborted' at once when the signal fires,
   * 'timeout' when `deadline` — an epoch-ms time, the caller's whole budget — passes first), and the
   * abandoned place in the queue is given up, so callers behind it move on. `bytes` is the call's weight in
   * the byte budget (0 for work that spawns nothing), held and released with the permits.
   */
  acquire(permits = 1, wait: PermitWait = {}, bytes = 0): Promise<() => void> {
    if (!Number.isInteger(permits) || permits < 1 || permits > this.capacity) {
      return Promise.reject(new Error(`Semaphore.acquire: permits must be an integer in 1..${this.capacity}, got ${permits}`));
    }
    if (!Number.isFinite(bytes) || bytes < 0) {
      return Promise.reject(new Error(`Semaphore.acquire: bytes must be a finite non-negative number, got ${bytes}`));
    }
    if (bytes > this.byteCapacity) {
      const mib = (n: number) => `${Math.round(n / 1024 ** 2)} MiB`;
      return Promise.reject(
        new Error(
          `the call's memory caps add up to ${mib(bytes)}, more than the sandbox's whole memory budget of ${mib(this.byteCapacity)}`,
        ),
      );
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
        bytes,
        grant: () => {
          cleanup();
          this.available -= permits;
          this.bytesHeld += bytes;
          this.peak = Math.max(this.peak, this.inUse);
          this.peakBytes = Math.max(this.peakBytes, this.bytesInUse);
          let released = false;
          resolve(() => {
            if (released) return;
            released = true;
            this.available += permits;
            this.bytesHeld -= bytes;
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
    while (
      this.queue.length > 0 &&
      this.queue[0]!.permits <= this.available &&
      this.bytesHeld + this.queue[0]!.bytes <= this.byteCapacity
    ) {
      this.queue.shift()!.grant();
    }
  }
}

/**
 * The one process-wide limit on concurrent sandbox subprocesses, shared by every tool and every worktree
 * (CodeGrep App. A.1: a global Semaphore(64)), with the worker-wide memory budget as its byte budget: each
 * stage weighs its address-space cap, so the caps of everything running together stay under the budget.
 */
export const subprocessSlots = new Semaphore(PAPER_LIMITS.maxConcurrentSubprocesses, sandboxMemoryBudgetBytes());
