/**
 * What a worker process does with an error nothing caught: an uncaught exception (thrown from a timer or an event
 * emitter callback) or an unhandled rejection (a promise nobody awaited). Both are logged through the worker's
 * logger with the activities running at the time (workers/running-activities.ts), and the worker keeps running.
 *
 * Why it survives rather than exits, as Node does by default: such an error comes from outside every activity's
 * own await chain (a callback after a cancellation, a log call after an activity ended, a best-effort push), so
 * no activity's result depends on it; each activity still ends through its own promise, its heartbeat timeout or
 * its start-to-close timeout, and Temporal retries it. A dead worker is the worse outcome: nothing serves its
 * task queue until someone restarts it (`codegrep run` has no supervisor; a GPU node's worker is often started by
 * hand), every workflow waiting on it hangs, and a trainer it started keeps the accelerator as an orphan until the
 * next attempt reaps it. The error is logged at ERROR with its stack, so it is fixed rather than hidden.
 *
 * Installed by the worker entry points (`runWorkerIfMain`) and `codegrep run`'s in-process workers, not by
 * tests that create workers in the test runner's process (the runner reports such errors as failures itself).
 */
import { Runtime } from '@temporalio/worker';
import { runningActivities } from './running-activities';

let installs = 0;

function report(kind: 'uncaught exception' | 'unhandled rejection', error: unknown): void {
  const activities = runningActivities();
  const meta = {
    error: error instanceof Error ? (error.stack ?? `${error.name}: ${error.message}`) : String(error),
    runningActivities: activities,
  };
  const during =
    activities.length === 0
      ? 'with no activity running'
      : `while running ${activities.map((a) => `${a.activityType} ${a.activityId} (workflow ${a.workflowId}, attempt ${a.attempt})`).join(', ')}`;
  try {
    Runtime.instance().logger.error(`worker: ${kind} ${during}; the worker keeps running (workers/process-guard.ts)`, meta);
  } catch {
    console.error(`codegrep worker: ${kind} ${during}; the worker keeps running`, meta);
  }
}

const onException = (error: unknown) => report('uncaught exception', error);
const onRejection = (reason: unknown) => report('unhandled rejection', reason);

/** Installs the handlers (once per process however many workers call it); the returned function removes them with the last. */
export function guardWorkerProcess(): () => void {
  if (installs++ === 0) {
    process.on('uncaughtException', onException);
    process.on('unhandledRejection', onRejection);
  }
  let removed = false;
  return () => {
    if (removed) return;
    removed = true;
    if (--installs === 0) {
      process.off('uncaughtException', onException);
      process.off('unhandledRejection', onRejection);
    }
  };
}
