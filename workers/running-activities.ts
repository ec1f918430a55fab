/**
 * Which activities this worker process is running now, recorded by an activity interceptor (createWorker adds it
 * to every worker), so an error that escapes every activity's own await chain (a timer, an event emitter) can
 * still be logged with the activity that was running when it surfaced.
 */
import type { Context } from '@temporalio/activity';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';

export interface RunningActivity {
  activityType: string;
  activityId: string;
  attempt: number;
  /** Null for a standalone activity (started by a client, not a workflow). */
  workflowId: string | null;
  workflowType: string | null;
  taskQueue: string;
  startedAt: string;
}

const running = new Map<Context, RunningActivity>();

/** The activities running in this process now, oldest first. */
export function runningActivities(): RunningActivity[] {
  return [...running.values()];
}

export const trackRunningActivities: ActivityInterceptorsFactory = (context) => ({
  inbound: {
    async execute(input, next) {
      const { activityType, activityId, attempt, workflowExecution, workflowType, taskQueue } = context.info;
      running.set(context, {
        activityType,
        activityId,
        attempt,
        workflowId: workflowExecution?.workflowId ?? null,
        workflowType: workflowType ?? null,
        taskQueue,
        startedAt: new Date().toISOString(),
      });
      try {
        return await next(input);
      } finally {
        running.delete(context);
      }
    },
  },
});
