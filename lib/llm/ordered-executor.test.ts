import { describe, expect, it } from 'vitest';
import { createOrderedExecutor, type ExecutorStep } from './ordered-executor';

const tick = (ms = 0) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A stream that records how far it was read. */
function counted(n: number): { items: AsyncIterable<number>; read: () => number } {
  let read = 0;
  return {
    items: (async function* () {
      for (let i = 0; i < n; i++) {
        read = i + 1;
        yield i;
      }
    })(),
    read: () => read,
  };
}

describe('createOrderedExecutor', () => {
  it('keeps at most `concurrency` tasks in flight, reads one item ahead, and delivers every result once', async () => {
    const delivered: number[] = [];
    let running = 0;
    let peak = 0;
    const executor = createOrderedExecutor<number>({ concurrency: 3, deliver: (n) => void delivered.push(n) });
    const stream = counted(10);
    // How far the stream was read beyond the tasks started, sampled whenever a task starts or ends. (Measured
    // against the started tasks, not against this task's index: on a loaded machine a slow early task may still
    // run while later ones have finished and others started, which is correct.)
    const readAhead: number[] = [];
    let started = 0;
    await executor.run(stream.items, (n): ExecutorStep<number> => ({
      kind: 'run',
      task: async () => {
        started += 1;
        running += 1;
        peak = Math.max(peak, running);
        readAhead.push(stream.read() - started);
        await tick(5 + (n % 3));
        readAhead.push(stream.read() - started);
        running -= 1;
        return n * 10;
      },
    }));
    executor.throwIfStopped();
    expect(peak).toBe(3);
    // The stream is at most one item past the started tasks.
    expect(Math.max(...readAhead)).toBeLessThanOrEqual(1);
    expect([...delivered].sort((a, b) => a - b)).toEqual([0, 10, 20, 30, 40, 50, 60, 70, 80, 90]);
    expect(executor.inFlight).toBe(0);
  });

  it('delivers one result at a time, and frees a slot only after the sink took its result', async () => {
    let sinkActive = 0;
    let sinkPeak = 0;
    let startedBeforeSinkDone = 0;
    let started = 0;
    let sinkDone = 0;
    const executor = createOrderedExecutor<number>({
      concurrency: 1,
      async deliver() {
        sinkActive += 1;
        sinkPeak = Math.max(sinkPeak, sinkActive);
        await tick(5);
        sinkActive -= 1;
        sinkDone += 1;
      },
    });
    await executor.run([1, 2, 3, 4], () => ({
      kind: 'run',
      task: async () => {
        if (started > sinkDone) startedBeforeSinkDone += 1;
        started += 1;
        return 0;
      },
    }));
    expect(sinkPeak).toBe(1);
    expect(startedBeforeSinkDone).toBe(0);
    expect(sinkDone).toBe(4);
  });

  it('delivers a result known at once before reading the next item, and passes over skipped ones', async () => {
    const log: string[] = [];
    const executor = createOrderedExecutor<string>({
      concurrency: 2,
      async deliver(s) {
        await tick(2);
        log.push(`deliver ${s}`);
      },
    });
    await executor.run(
      (function* () {
        for (const s of ['a', 'skip', 'b']) {
          log.push(`read ${s}`);
          yield s;
        }
      })(),
      (s): ExecutorStep<string> => (s === 'skip' ? { kind: 'skip' } : { kind: 'deliver', result: s }),
    );
    expect(log).toEqual(['read a', 'deliver a', 'read skip', 'read b', 'deliver b']);
  });

  it('a task that calls stop ends the run: no further item is read, the tasks in flight are aborted, the error is thrown', async () => {
    const stream = counted(100);
    const aborted: number[] = [];
    const executor = createOrderedExecutor<number>({ concurrency: 4, deliver: () => undefined });
    const failure = new Error('endpoint down');
    await executor.run(stream.items, (n) => ({
      kind: 'run',
      task: (signal) =>
        new Promise<number>((resolve, reject) => {
          if (n === 2) {
            executor.stop(failure);
            resolve(n);
            return;
          }
          signal.addEventListener('abort', () => {
            aborted.push(n);
            reject(signal.reason);
          });
        }),
    }));
    expect(executor.stopped()).toBe(true);
    expect(() => executor.throwIfStopped()).toThrow(failure);
    expect(stream.read()).toBeLessThan(10);
    expect(aborted.length).toBeGreaterThan(0);
    expect(executor.inFlight).toBe(0);
  });

  it('a sink that throws stops the run with its error and receives nothing after it', async () => {
    const delivered: number[] = [];
    const executor = createOrderedExecutor<number>({
      concurrency: 4,
      deliver(n) {
        if (n === 2) throw new Error('disk full');
        delivered.push(n);
      },
    });
    await executor.run([0, 1, 2, 3, 4, 5, 6, 7], (n) => ({ kind: 'run', task: async () => n }));
    expect(() => executor.throwIfStopped()).toThrow('disk full');
    expect(delivered).not.toContain(2);
    expect(delivered.every((n) => n < 2)).toBe(true);
  });

  it('a stream that throws, or a plan that throws, stops the run with that error', async () => {
    const broken = createOrderedExecutor<number>({ concurrency: 2, deliver: () => undefined });
    await broken.run(
      (async function* () {
        yield 1;
        throw new Error('truncated input');
      })(),
      (n) => ({ kind: 'run', task: async () => n }),
    );
    expect(() => broken.throwIfStopped()).toThrow('truncated input');

    const badPlan = createOrderedExecutor<number>({ concurrency: 2, deliver: () => undefined });
    await badPlan.run([1], () => {
      throw new Error('plan failed');
    });
    expect(() => badPlan.throwIfStopped()).toThrow('plan failed');
  });

  it("the caller's abort cancels the tasks in flight and throwIfStopped throws the abort reason", async () => {
    const caller = new AbortController();
    const executor = createOrderedExecutor<number>({ concurrency: 2, deliver: () => undefined, signal: caller.signal });
    const reason = new Error('cancelled by the user');
    const seen: unknown[] = [];
    const running = executor.run([1, 2, 3], () => ({
      kind: 'run',
      task: (signal) =>
        new Promise<number>((_, reject) =>
          signal.addEventListener('abort', () => {
            seen.push(signal.reason);
            reject(signal.reason);
          }),
        ),
    }));
    await tick(5);
    caller.abort(reason);
    await running;
    expect(seen).toEqual([reason, reason]);
    expect(() => executor.throwIfStopped()).toThrow(reason);
  });

  it('rejects a concurrency that is not a positive integer', () => {
    expect(() => createOrderedExecutor({ concurrency: 0, deliver: () => undefined })).toThrow(/integer ≥ 1, got 0/);
  });
});
