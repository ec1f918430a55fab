import { setImmediate as yieldToLoop } from 'node:timers/promises';

/**
 * Keeps long in-process loops over tool output or directory entries from blocking the event loop: every
 * other tool call in the worker (and Temporal's heartbeats) runs on the same thread. A loop calls
 * `await slice.pass()` once per item; it yields to the event loop (setImmediate, so pending I/O and timers
 * run) whenever the current slice has run for `sliceMs`, and returns false once `deadline` (epoch ms) has
 * passed, so the loop stops at the item where its budget ran out rather than at the end of a directory.
 */
export class TimeSlice {
  private sliceStarted = performance.now();

  constructor(
    private readonly deadline = Infinity,
    private readonly sliceMs = TIME_SLICE_MS,
  ) {}

  /** True while there is time left; yields first when this slice is used up. */
  async pass(): Promise<boolean> {
    if (performance.now() - this.sliceStarted >= this.sliceMs) {
      await yieldToLoop();
      this.sliceStarted = performance.now();
    }
    return Date.now() <= this.deadline;
  }

  /** Whether this slice is used up (for synchronous callbacks that hand the rest of their work to a loop). */
  get spent(): boolean {
    return performance.now() - this.sliceStarted >= this.sliceMs;
  }
}

/**
 * Longest stretch of in-process work between two yields: well under the 50 ms the sandbox promises other
 * callers, leaving room for one item's own cost (a name matched by the linear wildcard matcher).
 */
export const TIME_SLICE_MS = 5;
