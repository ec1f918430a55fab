import os from 'node:os';
import type { Client } from '@temporalio/client';
import { isProcessAlive } from '../lib/process';

/**
 * Whether a worker serves a task queue, for `codegrep run` to decide whether to start one in its own process.
 *
 * The server lists a poller for minutes after its worker died (a demo stopped with Ctrl-C, or the previous
 * `codegrep run`'s in-process worker, which stops when that command ends). A live one polls again at least once
 * per long-poll (about a minute), so only recent pollers count; and a poller whose identity is the SDK's default
 * `<pid>@<host>` with this machine's host name is checked against the process table: a recent poll from a
 * process that has exited is a dead worker, the case of a re-run started within a minute of the last one.
 * Workers on other machines cannot be checked from here: `unclaimedWorkflowTaskMs` catches those.
 */
export async function livePollers(client: Client, taskQueue: string, kind: 'workflow' | 'activity'): Promise<string[]> {
  const response = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    taskQueue: { name: taskQueue },
    taskQueueType: kind === 'workflow' ? 1 : 2,
  });
  const now = Date.now();
  return (response.pollers ?? [])
    .filter((poller) => {
      const seconds = Number(poller.lastAccessTime?.seconds ?? 0);
      return seconds === 0 || now - seconds * 1000 < LIVE_POLLER_MS;
    })
    .map((poller) => poller.identity ?? '')
    .filter((identity) => !isExitedLocalProcess(identity));
}
const LIVE_POLLER_MS = 75_000;

/** A poller identity `<pid>@<host>` of this host whose process no longer runs. */
export function isExitedLocalProcess(identity: string, host = os.hostname()): boolean {
  const match = /^(\d+)@(.+)$/.exec(identity);
  if (!match || match[2] !== host) return false;
  return !isProcessAlive(Number(match[1]), null);
}

/**
 * How long the workflow's current workflow task has waited for a worker to pick it up (ms), or null when none
 * waits (it started, or there is none). A live worker starts a workflow task within moments; one that waits
 * seconds means nobody polls the queue, whatever the server's poller list says.
 */
export async function unclaimedWorkflowTaskMs(client: Client, workflowId: string): Promise<number | null> {
  const { raw } = await client.workflow.getHandle(workflowId).describe();
  const pending = raw.pendingWorkflowTask;
  const SCHEDULED = 1; // PENDING_WORKFLOW_TASK_STATE_SCHEDULED
  if (!pending || pending.state !== SCHEDULED) return null;
  const since = pending.originalScheduledTime ?? pending.scheduledTime;
  if (!since) return null;
  return Date.now() - (Number(since.seconds ?? 0) * 1000 + Math.floor((since.nanos ?? 0) / 1e6));
}
