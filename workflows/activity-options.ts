import type { ActivityOptions } from '@temporalio/workflow';
import { activityTimeouts, retryPolicy } from '../temporal.config';

/**
 * Activity options from temporal.config.ts. Workflow code runs in a sandbox without `process.env`, so the
 * environment overrides reach workflows through the run config (`temporal` section, filled in by
 * `codegrep run` from the same temporal.config.ts); without it the defaults apply.
 */
export type ActivityKind = keyof typeof activityTimeouts;
export type TimeoutOverrides = Partial<Record<ActivityKind, { startToCloseMs?: number; heartbeatMs?: number }>>;

export function activityOptions(kind: ActivityKind, overrides: TimeoutOverrides = {}): ActivityOptions {
  const timeouts = { ...activityTimeouts[kind], ...(overrides[kind] ?? {}) };
  return {
    startToCloseTimeout: timeouts.startToCloseMs,
    heartbeatTimeout: timeouts.heartbeatMs,
    retry: {
      initialInterval: retryPolicy.initialIntervalMs,
      backoffCoefficient: retryPolicy.backoffCoefficient,
      maximumInterval: retryPolicy.maximumIntervalMs,
      maximumAttempts: retryPolicy.maximumAttempts,
      nonRetryableErrorTypes: [...retryPolicy.nonRetryableErrorTypes],
    },
  };
}
