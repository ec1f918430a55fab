import type { Context } from '@temporalio/activity';

/** Where log lines go once the activity has ended: the worker's own logger (ActivityDeps.logger). */
export interface FallbackLogger {
  info(message: string, meta?: Record<string, unknown>): void;
  warn(message: string, meta?: Record<string, unknown>): void;
  error(message: string, meta?: Record<string, unknown>): void;
}

/** Late lines without a worker logger (a test's deps). */
export const stderrLogger: FallbackLogger = {
  info: (message, meta) => console.error(`[INFO] ${message}`, meta ?? ''),
  warn: (message, meta) => console.error(`[WARN] ${message}`, meta ?? ''),
  error: (message, meta) => console.error(`[ERROR] ${message}`, meta ?? ''),
};

export interface ActivityLog extends FallbackLogger {
  /** From now on lines go to the worker's logger, tagged with this activity's identity. */
  end(): void;
  readonly ended: boolean;
}

/**
 * The activity's logger, captured while the activity is live. `log` of @temporalio/activity looks the context up
 * in async-local storage on every call, so a callback that runs outside that context (a timer started by the
 * cancellation, which the SDK delivers from its own context, or anything firing after the activity ended)
 * throws "Activity context not initialized" from a timer: an uncaught exception that kills the worker. This one
 * never looks anything up; after `end()` its lines name the activity they belong to.
 */
export function captureActivityLog(context: Context, workerLogger: FallbackLogger): ActivityLog {
  const live = context.log;
  const { activityType, activityId, attempt, workflowExecution, workflowType } = context.info;
  const identity = {
    activityType,
    activityId,
    attempt,
    workflowId: workflowExecution?.workflowId ?? null,
    workflowType: workflowType ?? null,
    afterActivityEnd: true,
  };
  let ended = false;
  const line =
    (level: 'info' | 'warn' | 'error') =>
    (message: string, meta?: Record<string, unknown>): void => {
      if (!ended) live[level](message, meta);
      else workerLogger[level](message, { ...meta, ...identity });
    };
  return {
    info: line('info'),
    warn: line('warn'),
    error: line('error'),
    end: () => {
      ended = true;
    },
    get ended() {
      return ended;
    },
  };
}
