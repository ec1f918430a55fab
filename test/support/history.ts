import type { Client } from '@temporalio/client';

/**
 * A workflow's history, counted for the history-bound tests (README "History bounds"). `commandEvents` leaves out workflow-task
 * events (scheduled / started / completed / timed out / failed): how many workflow tasks a run takes depends on
 * how activity results happen to arrive together, and on a loaded machine a task can time out and be retried.
 * Neither depends on the length of the run, so the bounds are checked on `commandEvents`, and `workflowTaskEvents`
 * only against them (every workflow task answers at least one new event).
 */
export interface HistoryCounts {
  events: number;
  workflowTaskEvents: number;
  commandEvents: number;
  signals: Record<string, number>;
}

export async function historyCounts(client: Client, workflowId: string, runId?: string): Promise<HistoryCounts> {
  const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  const signals: Record<string, number> = {};
  let workflowTaskEvents = 0;
  for (const event of history.events ?? []) {
    const name = event.workflowExecutionSignaledEventAttributes?.signalName;
    if (name) signals[name] = (signals[name] ?? 0) + 1;
    if (
      event.workflowTaskScheduledEventAttributes ||
      event.workflowTaskStartedEventAttributes ||
      event.workflowTaskCompletedEventAttributes ||
      event.workflowTaskTimedOutEventAttributes ||
      event.workflowTaskFailedEventAttributes
    ) {
      workflowTaskEvents += 1;
    }
  }
  const events = history.events?.length ?? 0;
  return { events, workflowTaskEvents, commandEvents: events - workflowTaskEvents, signals };
}
